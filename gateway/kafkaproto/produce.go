package kafkaproto

// Behavior: Produce v3–v11 and InitProducerId v0–v4.
//
//   - Each partition is admitted with the produce op: a capability
//     connection needs a capability with op produce for exactly that
//     partition (its byte rate counts the records' bytes: an exhausted
//     rate answers THROTTLING_QUOTA_EXCEEDED, retriable); a
//     client-credential connection needs a credential whose tps claim
//     names the topic itself ("*" does not count) and that is not denied.
//     Refused partitions answer the boundary table's error without
//     their leader being looked up (a refusal costs Kafka nothing); the
//     others are forwarded to their Kafka leaders, one request per leader,
//     record batches untouched, acks as the client asked.
//   - Transactions are refused (TRANSACTIONAL_ID_AUTHORIZATION_FAILED):
//     a transaction spans partitions no single capability covers.
//     Idempotent producers work: InitProducerId without a transactional
//     id is forwarded to Kafka, for principals that may produce at all
//     now (a denied, fenced or expired one: CLUSTER_AUTHORIZATION_FAILED).
//   - acks=0 gets no answer, as from Kafka.

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/api"
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
			code := c.admitProduce(rt.Topic, rp.Partition, len(rp.Records), now)
			if code == api.CodeRateLimited {
				out.ErrorCode = kerr.ThrottlingQuotaExceeded.Code
				continue
			}
			if code != "" {
				// Refused before its leader is looked up: a refusal costs
				// Kafka nothing, whatever topics the request makes up.
				out.ErrorCode = partitionError(code)
				continue
			}
			route, code := c.route(rt.Topic, rp.Partition)
			if code != "" {
				out.ErrorCode = partitionError(code)
				continue
			}
			pc := calls[route.Leader]
			if pc == nil {
				pc = newProduceCall(req)
				calls[route.Leader] = pc
			}
			pc.add(rt.Topic, route.TopicID, rp, out)
		}
	}
	c.produceUpstream(calls)
	if req.Acks == 0 {
		return nil, nil
	}
	return resp, nil
}

// admitProduce decides one partition of a Produce.
func (c *conn) admitProduce(topic string, partition int32, size int, now time.Time) api.Code {
	if !c.principal.capability() {
		if !namesTopic(c.principal.Claims, topic) {
			return api.CodeForbidden
		}
		return c.checkClient(now)
	}
	a := c.admit(topic, partition, ocap.OpProduce, -1, now)
	switch {
	case a.code != "":
		return a.code
	case a.throttle > 0:
		return api.CodeRateLimited
	}
	c.s.gate.Observe(a.claims, OpProduce, "", size, now)
	return ""
}

// namesTopic reports whether a client credential's tps claim names topic
// itself: producing with a credential needs it scoped to the topic.
func namesTopic(c *ocap.Claims, topic string) bool {
	return slices.Contains(c.Topics, topic)
}

// produceCall is the part of a Produce going to one Kafka leader.
type produceCall struct {
	req  *kmsg.ProduceRequest
	outs []produceOut
}

type produceOut struct {
	topic string
	id    [16]byte
	out   *kmsg.ProduceResponseTopicPartition
}

func newProduceCall(from *kmsg.ProduceRequest) *produceCall {
	up := kmsg.NewPtrProduceRequest()
	up.Acks, up.TimeoutMillis = from.Acks, from.TimeoutMillis
	return &produceCall{req: up}
}

// add appends one partition; topics are sent by name and id (Kafka uses
// ids from Produce v13 on).
func (pc *produceCall) add(topic string, id [16]byte, rp kmsg.ProduceRequestTopicPartition, out *kmsg.ProduceResponseTopicPartition) {
	if n := len(pc.req.Topics); n == 0 || pc.req.Topics[n-1].Topic != topic {
		t := kmsg.NewProduceRequestTopic()
		t.Topic, t.TopicID = topic, id
		pc.req.Topics = append(pc.req.Topics, t)
	}
	t := &pc.req.Topics[len(pc.req.Topics)-1]
	t.Partitions = append(t.Partitions, rp)
	pc.outs = append(pc.outs, produceOut{topic: topic, id: id, out: out})
}

// produceUpstream sends every leader's part concurrently and copies the
// answers back.
func (c *conn) produceUpstream(calls map[int32]*produceCall) {
	var wg sync.WaitGroup
	for leader, pc := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.produceOne(leader, pc)
		}()
	}
	wg.Wait()
}

func (c *conn) produceOne(leader int32, pc *produceCall) {
	ctx, cancel := context.WithTimeout(c.ctx, c.s.cfg.RequestTimeout+time.Duration(pc.req.TimeoutMillis)*time.Millisecond)
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
// naming topics and still good. A principal that may not gets no
// producer id from Kafka.
func (c *conn) mayProduce(now time.Time) api.Code {
	p := c.principal.Claims
	if c.principal.capability() {
		if !p.Ops.Has(ocap.OpProduce) {
			return api.CodeForbidden
		}
		return c.admit(p.Topic, p.PartitionNumber(), ocap.OpProduce, -1, now).code
	}
	if len(p.Topics) == 0 || slices.Equal(p.Topics, []string{"*"}) {
		return api.CodeForbidden
	}
	return c.checkClient(now)
}
