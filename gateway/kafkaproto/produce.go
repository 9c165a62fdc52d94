package kafkaproto

// Behavior: Produce v3–v11 and InitProducerId v0–v4.
//
//   - Each partition is admitted with the produce op: a capability
//     connection needs a capability with op produce for exactly that
//     partition (its byte rate counts the records' bytes: an exhausted
//     rate answers NOT_ENOUGH_REPLICAS, see notWrittenRetry, with
//     ThrottleMillis until the rate allows it, at most 1 s); a
//     client-credential connection needs a credential with the produce
//     op whose tps claim names the topic itself (a pattern, "*" or
//     "orders-*", grants consume only; ocap.Claims.MayProduceTo) and that
//     is not denied; its byte rate is admitted per partition as over
//     HTTP (Gate.AdmitRate: its own budget, or an override selecting it,
//     or the topic and partition written — the claims scoped there,
//     scopedTo; exhausted: NOT_ENOUGH_REPLICAS and ThrottleMillis as for
//     a capability). A credential without the op claim (minted before
//     client ops existed, or consume-only) may not produce:
//     TOPIC_AUTHORIZATION_FAILED. An IdP identity (gateway.kafka_oidc)
//     is decided the same way by its rules: it may write to a topic
//     only when a rule it matches has the produce op and names the topic
//     exactly (identity.Identity.ProduceTopics: never widened by another
//     rule's topics); with no such rule it is consume only. Neither
//     writes to a topic hidden from every client (Kafka's own "__*", the
//     coordinator's state topics: Config.InternalTopic), whatever it
//     names.
//     Refused partitions answer the boundary table's error without
//     their leader being looked up (a refusal costs Kafka nothing); the
//     others are forwarded to their Kafka leaders, one request per leader,
//     record batches untouched, acks as the client asked.
//   - Each request to a leader is registered in the gateway's in-flight
//     registry (Gate.Track, bounded) under the capability (or client
//     credential) it was admitted under, before the partitions are
//     decided once more (a revocation applied meanwhile refuses them):
//     a revocation's acknowledgement waits until Kafka answered, so
//     nothing admitted under a revoked capability is written after every
//     gateway acknowledged the revocation. The write is never cancelled —
//     neither by the revocation nor by the client hanging up — since a
//     write cancelled on its way could still land, unseen; request_timeout
//     plus the request's own timeout bound it. Over max_inflight_fetches
//     or _per_holder (produces count like fetches) the leader's partitions
//     answer NOT_ENOUGH_REPLICAS (notWrittenRetry: the one code every
//     client retries as "not written"; nothing was sent, so an idempotent
//     producer's retry keeps its sequence) and the response's
//     ThrottleMillis is 1 s, the pause a fetch over a cap gets.
//   - Transactions are refused (TRANSACTIONAL_ID_AUTHORIZATION_FAILED):
//     a transaction spans partitions no single capability covers.
//     Idempotent producers work: InitProducerId without a transactional
//     id is forwarded to Kafka, for principals that may produce at all
//     now (a denied, fenced or expired one: CLUSTER_AUTHORIZATION_FAILED).
//   - acks=0 gets no answer, as from Kafka.

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/gateway/authz"
	"github.com/capgate/capgate/ocap"
)

func handleProduce(c *conn, _ header, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	now := time.Now()
	calls := map[int32]*produceCall{}
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	for i, rt := range req.Topics {
		t := &resp.Topics[i]
		*t = kmsg.NewProduceResponseTopic()
		t.Topic = rt.Topic
		t.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		for j, rp := range rt.Partitions {
			out := &t.Partitions[j]
			*out = kmsg.NewProduceResponseTopicPartition()
			out.Partition, out.BaseOffset, out.LogStartOffset = rp.Partition, -1, -1
			if req.TransactionID != nil {
				out.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
				continue
			}
			claims, code, wait := c.admitProduce(rt.Topic, rp.Partition, now)
			if code == api.CodeRateLimited {
				out.ErrorCode = notWrittenRetry.Code
				resp.ThrottleMillis = max(resp.ThrottleMillis, int32(min(wait, overCapThrottle).Milliseconds()))
				c.s.gate.Observe(nil, OpProduce, code, 0, now)
				continue
			}
			if code != "" {
				// Refused before its leader is looked up: a refusal costs
				// Kafka nothing, whatever topics the request makes up.
				out.ErrorCode = c.partitionError(code)
				continue
			}
			route, code := c.route(rt.Topic, rp.Partition)
			if code != "" {
				out.ErrorCode = c.partitionError(code)
				continue
			}
			pc := calls[route.Leader]
			if pc == nil {
				pc = newProduceCall(req, claims)
				calls[route.Leader] = pc
			}
			pc.add(claims, rt.Topic, route.TopicID, rp, out)
		}
	}
	if throttled := c.produceUpstream(calls, now); throttled {
		resp.ThrottleMillis = int32(overCapThrottle.Milliseconds())
	}
	if req.Acks == 0 {
		return nil, nil
	}
	return resp, nil
}

// notWrittenRetry is what a partition refused for load (its byte rate
// spent, or its holder over an in-flight cap) answers: nothing was
// written, try again. It was THROTTLING_QUOTA_EXCEEDED, which kgo and the
// Java client retry but librdkafka (kcat, confluent-kafka-*) takes for a
// permanent failure (rd_kafka_err_action's default): the record was
// dropped. NOT_ENOUGH_REPLICAS is the one code kgo, the Java client,
// KafkaJS and librdkafka all retry as "not written"
// (RD_KAFKA_ERR_ACTION_MSG_NOT_PERSISTED), so an idempotent producer's
// retry keeps its sequence; the response's ThrottleMillis says how long
// to wait, and the gateway's log and metrics name the real cause.
var notWrittenRetry = kerr.NotEnoughReplicas

// admitProduce decides one partition of a Produce and returns the claims
// it is admitted under: the connection's client credential, or the
// capability covering the partition. A partition over its byte rate
// returns api.CodeRateLimited and how long until the rate allows it.
func (c *conn) admitProduce(topic string, partition int32, now time.Time) (*ocap.Claims, api.Code, time.Duration) {
	if !c.principal.capability() {
		// A topic hidden from every client (Kafka's own, the
		// coordinator's state topics) is never written, whatever a
		// credential or an IdP rule names.
		if c.s.internalTopic(topic) || !c.principal.mayProduceTo(topic) {
			return nil, api.CodeForbidden, 0
		}
		if code := c.checkClient(now); code != "" {
			return nil, code, 0
		}
		// Its byte rate, as the HTTP produce admits it: under the QoS
		// that applies to it there (its own budget, or an override
		// selecting it or the topic and partition). Its bytes were only
		// charged afterwards, so no rate ever slowed it (redteam10 #3).
		claims := scopedTo(c.principal.Claims, topic, partition)
		if wait := c.s.gate.AdmitRate(claims, now); wait > 0 {
			return nil, api.CodeRateLimited, wait
		}
		return claims, "", 0
	}
	a := c.admit(topic, partition, ocap.OpProduce, -1, now)
	switch {
	case a.code != "":
		return nil, a.code, 0
	case a.throttle > 0:
		return nil, api.CodeRateLimited, a.throttle
	}
	return a.claims, "", 0
}

// scopedTo is a client principal's claims as they apply to one
// partition written (gateway.scoped for the HTTP produce): with its topic
// and partition, so a QoS override selecting them selects the write, and
// its bytes are charged there. Kind, jti, chain and expiry stay the
// credential's.
func scopedTo(c *ocap.Claims, topic string, partition int32) *ocap.Claims {
	s := *c
	s.Topic, s.Partition = topic, &partition
	return &s
}

// recheckProduce decides a partition again once its write is registered
// in flight, just before it is sent.
func (c *conn) recheckProduce(claims *ocap.Claims, req authz.Request, now time.Time) api.Code {
	if !c.principal.capability() {
		return c.checkClient(now)
	}
	return c.s.gate.Recheck(claims, req, now)
}

// produceCall is the part of a Produce going to one Kafka leader, all
// of it admitted under one principal: a capability connection's
// partition, or a client credential's partitions.
type produceCall struct {
	req    *kmsg.ProduceRequest
	claims *ocap.Claims
	outs   []produceOut
}

type produceOut struct {
	claims *ocap.Claims // the partition's own (a credential's scoped to it: its bytes are charged there)
	topic  string
	id     [16]byte
	size   int
	out    *kmsg.ProduceResponseTopicPartition
}

func newProduceCall(from *kmsg.ProduceRequest, claims *ocap.Claims) *produceCall {
	up := kmsg.NewPtrProduceRequest()
	up.Acks, up.TimeoutMillis = from.Acks, from.TimeoutMillis
	return &produceCall{req: up, claims: claims}
}

// add appends one partition; topics are sent by name and id (Kafka uses
// ids from Produce v13 on).
func (pc *produceCall) add(claims *ocap.Claims, topic string, id [16]byte, rp kmsg.ProduceRequestTopicPartition, out *kmsg.ProduceResponseTopicPartition) {
	if n := len(pc.req.Topics); n == 0 || pc.req.Topics[n-1].Topic != topic {
		t := kmsg.NewProduceRequestTopic()
		t.Topic, t.TopicID = topic, id
		pc.req.Topics = append(pc.req.Topics, t)
	}
	t := &pc.req.Topics[len(pc.req.Topics)-1]
	t.Partitions = append(t.Partitions, rp)
	pc.outs = append(pc.outs, produceOut{claims: claims, topic: topic, id: id, size: len(rp.Records), out: out})
}

// request is the registry's view of the call: its first partition (all
// of it is under one principal).
func (pc *produceCall) request() authz.Request {
	return authz.Request{Topic: pc.outs[0].topic, Partition: pc.outs[0].out.Partition, Op: ocap.OpProduce, Offset: -1}
}

// produceUpstream registers every leader's part in flight, decides its
// partitions again, sends the parts concurrently and copies the answers
// back; throttled reports a part refused by the in-flight caps.
func (c *conn) produceUpstream(calls map[int32]*produceCall, now time.Time) (throttled bool) {
	var wg sync.WaitGroup
	for leader, pc := range calls {
		req := pc.request()
		// Registered before the partitions are decided again: a
		// revocation applied after this decision finds the write in
		// flight and waits for Kafka's answer before its ack.
		_, done, code := c.s.gate.Track(c.s.base, pc.claims, req, true)
		if code != "" {
			throttled = true
			for _, po := range pc.outs {
				po.out.ErrorCode = notWrittenRetry.Code
				c.s.gate.Observe(pc.claims, OpProduce, code, 0, now)
			}
			continue
		}
		if code := c.recheckProduce(pc.claims, req, time.Now()); code != "" {
			done()
			for _, po := range pc.outs {
				po.out.ErrorCode = c.partitionError(code)
				c.s.gate.Observe(pc.claims, OpProduce, code, 0, now)
			}
			continue
		}
		for _, po := range pc.outs {
			c.s.gate.Observe(po.claims, OpProduce, "", po.size, now)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer done() // once Kafka answered (or request_timeout passed)
			c.produceOne(leader, pc)
		}()
	}
	wg.Wait()
	return throttled
}

// produceOne sends one leader's part. Its context is not the tracked
// one, nor the connection's: the write is never cancelled on its way.
func (c *conn) produceOne(leader int32, pc *produceCall) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), c.s.cfg.RequestTimeout+time.Duration(pc.req.TimeoutMillis)*time.Millisecond)
	defer cancel()
	kresp, err := c.s.gate.Broker().RequestNode(ctx, leader, pc.req)
	if pc.req.Acks == 0 {
		return
	}
	for _, po := range pc.outs {
		po.out.ErrorCode = kerr.NotLeaderForPartition.Code // unanswered: the client retries
		if err != nil {
			continue
		}
		if a := findProduced(kresp.(*kmsg.ProduceResponse), po); a != nil {
			partition := po.out.Partition
			*po.out = *a
			po.out.Partition = partition
			// Kafka's leader hints (KIP-951) name Kafka's brokers, which
			// the client never sees: it is told about gateways only.
			po.out.CurrentLeader = kmsg.NewProduceResponseTopicPartitionCurrentLeader()
		}
	}
}

func findProduced(resp *kmsg.ProduceResponse, po produceOut) *kmsg.ProduceResponseTopicPartition {
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if t.Topic != po.topic && (t.Topic != "" || t.TopicID != po.id) {
			continue
		}
		for j := range t.Partitions {
			if t.Partitions[j].Partition == po.out.Partition {
				return &t.Partitions[j]
			}
		}
	}
	return nil
}

func handleInitProducerID(c *conn, _ header, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		c.sayTransactionsRefused(*req.TransactionalID)
		return resp, nil
	}
	if code := c.mayProduce(time.Now()); code != "" {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		if api.IsRetriable(code) {
			resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		}
		return resp, nil
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.s.cfg.RequestTimeout)
	defer cancel()
	up := kmsg.NewPtrInitProducerIDRequest()
	up.TransactionTimeoutMillis, up.ProducerID, up.ProducerEpoch = req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch
	kresp, err := c.s.gate.Broker().Request(ctx, up)
	if err != nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil
	}
	r := kresp.(*kmsg.InitProducerIDResponse)
	resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = r.ErrorCode, r.ProducerID, r.ProducerEpoch
	return resp, nil
}

// mayProduce decides whether the principal may produce anywhere now
// ("" when it may): a capability with the produce op, admitted for its
// own partition (not denied, fenced or expired), or a client credential
// (or IdP identity) with the produce op naming a topic exactly and still
// good. A principal
// that may not gets no producer id from Kafka.
func (c *conn) mayProduce(now time.Time) api.Code {
	p := c.principal.Claims
	if c.principal.capability() {
		if !p.Ops.Has(ocap.OpProduce) {
			return api.CodeForbidden
		}
		return c.admit(p.Topic, p.PartitionNumber(), ocap.OpProduce, -1, now).code
	}
	if !c.principal.producesAnywhere() {
		return api.CodeForbidden
	}
	return c.checkClient(now)
}

// mayProduceTo reports whether a client principal may write to topic: a
// client credential by its op claim and exact topics
// (ocap.Claims.MayProduceTo), an IdP identity by its rules
// (identity.Identity.MayProduceTo) — never by the identity's claims in
// credential shape, whose one topic list unites every matching rule's.
func (p *Principal) mayProduceTo(topic string) bool {
	if p.Identity != nil {
		return p.Identity.MayProduceTo(topic)
	}
	return p.Claims.MayProduceTo(topic)
}

// producesAnywhere reports whether a client principal may write to some
// topic (InitProducerId).
func (p *Principal) producesAnywhere() bool {
	if p.Identity != nil {
		return p.Identity.ProducesAnywhere()
	}
	return p.Claims.ProducesAnywhere()
}
