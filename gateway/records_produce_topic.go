package gateway

// Behavior: POST /v1/topics/{topic}/records — produce to a topic, the
// gateway choosing the partitions, as a Kafka producer does. The bearer
// is a capgate client credential allowed to produce to the topic, checked
// as on the per-partition route (credentialProducing: sync, verification
// under the failed-token budget, the deny-list, produce op, topic named
// exactly, no internal topic). The body, its caps and refusals are the
// per-partition route's (api.ProduceRequest: max_body_bytes,
// max_produce_records, strict base64, 413 record_too_large for a record
// over the producer's batch limit), and so are the in-flight caps (the
// request is one produce in flight, decided again once registered).
//
// Placement, over the topic's current partition count (the gateway's
// metadata cache, at most metadata_max_age old; an unknown topic is 404
// before anything is written): a record with a key — an empty key ""
// included — goes to murmur2(key) modulo the count, Kafka's default
// partitioner (client.Partitioner: franz-go's, equal to the Java
// client's); records without a key ("key" left out or null) all go to
// one partition, a random one each request — the request is the batch
// of Kafka's sticky partitioner (KIP-480, the Java client's and
// franz-go's default): one write, where round-robin made a write per
// partition of a request of keyless records (newuser9).
//
// Byte rate: admitted for every partition written, under the QoS that
// applies to the credential writing there (scoped: an override selecting
// the topic and a partition applies to that partition's share), so a
// request is 429 when any of its partitions is out of budget, before
// anything is written; the body's bytes are charged split by record
// count.
//
// Writing: each partition's records are one produce (acks=all,
// idempotent, in request order), the partitions concurrently. Kafka
// has no atomic write across partitions outside transactions, so when a
// partition's write fails the others may have been written: the answer
// is that failure's error (404, 413 record_too_large, 400 invalid
// record, 502 broker_error, 503 unavailable; the lowest failed
// partition's) with details.partitions listing every partition of the
// request — written ones with base_offset, last_offset and count, failed
// ones with count and error (their records were not written, but for a
// timeout, after which they may have been). A client must not send the
// whole request again blindly. 200 api.TopicProduceResponse otherwise.
//
// A capability is refused 403 forbidden naming the per-partition route
// (it covers one partition; it is not verified here); a member token or
// a JWT that is no capgate token 401, as on the per-partition route.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/broker"
	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/gateway/authz"
	"github.com/capgate/capgate/ocap"
)

// partitionRecordsRoute is the route a capability produces on.
const partitionRecordsRoute = "/v1/topics/{topic}/partitions/{partition}/records"

func (g *Gateway) produceTopicRecords(ctx *fasthttp.RequestCtx, topic []byte) {
	c := call{g: g, ctx: ctx, op: opProduce, start: ctx.Time()}
	code := c.produceTopic(topic)
	c.finish(code)
}

// clientCredentialRequired answers a topic produce whose bearer is no
// client credential (or that has none).
const clientCredentialRequired = "a client credential is required: POST /v1/topics/{topic}/records takes a capgate client credential whose ops include produce and whose topics name the topic (Authorization: Bearer)"

func (c *call) produceTopic(topic []byte) api.Code {
	ctx := c.ctx
	if code := refuseNoBearer(ctx, "client credential", clientCredentialRequired); code != "" {
		return code
	}
	if !ocap.ValidTopic(string(topic)) {
		writeError(ctx, api.CodeBadRequest, fmt.Sprintf("topic %.64q in the path: a topic is 1 to 249 of a-z A-Z 0-9 . _ -, not . or ..", topic), nil)
		return api.CodeBadRequest
	}
	if code := produceRequestProblem(ctx); code != "" {
		return code
	}
	claims, code := c.topicProducer(topic)
	if code != "" {
		return code
	}
	recs, code := c.produceBody()
	if code != "" {
		return code
	}
	n, err := c.g.broker.PartitionCount(context.Background(), c.req.Topic)
	if err != nil {
		return c.topicBrokerFailure(err, "", nil)
	}
	shares := placeRecords(recs, n)
	if code := c.admitShares(claims, shares); code != "" {
		return code
	}
	finish, code := c.startProducing()
	if code != "" {
		return code
	}
	defer finish()
	c.g.writeShares(c.req.Topic, shares)
	c.bytes, c.records = len(ctx.PostBody()), len(recs)
	c.chargeShares(claims, shares)
	if code := c.answerShares(shares); code != "" {
		return code
	}
	c.g.metrics.bytesIn.Add(float64(c.bytes))
	return ""
}

// topicProducer admits the bearer of a topic produce: a client
// credential allowed to produce to topic. c.claims and c.req are then
// the credential's for the whole topic (partition -1: a QoS override
// selecting a partition applies to that partition's share, admitShares).
func (c *call) topicProducer(topic []byte) (*ocap.Claims, api.Code) {
	token, _ := bearerToken(&c.ctx.Request.Header)
	kind, jwt := tokenKind(token)
	switch {
	case kind == ocap.KindCapability:
		if code := c.g.refuseUnsynced(c.ctx, c.start); code != "" {
			return nil, code
		}
		writeError(c.ctx, api.CodeForbidden, "a capability covers one partition: produce with it at POST "+partitionRecordsRoute+"; POST /v1/topics/{topic}/records takes a client credential whose ops include produce and whose topics name the topic, and places the records itself",
			map[string]any{"route": partitionRecordsRoute})
		return nil, api.CodeForbidden
	case kind == ocap.KindMember:
		return nil, c.refuseBearer(memberCannotProduce)
	case kind != ocap.KindClient:
		if jwt {
			return nil, c.refuseBearer(foreignCannotProduce)
		}
		return nil, c.refuseBearer(clientCredentialRequired)
	}
	claims, code := c.credentialProducing(token, topic)
	if code != "" {
		return nil, code
	}
	c.req = authz.Request{Topic: string(topic), Partition: -1, Op: ocap.OpProduce, Offset: -1}
	c.claims = scoped(claims, c.req)
	c.qos = c.g.view.QoS(c.claims, c.start)
	return claims, ""
}

// share is one partition's records of a topic produce and, once
// written, their outcome.
type share struct {
	partition int32
	recs      []*kgo.Record
	err       error
}

// placeRecords groups recs by the partition Kafka's default partitioner
// gives them over n partitions (keyless ones all to one random
// partition), in partition order, each group in request order.
func placeRecords(recs []*kgo.Record, n int32) []*share {
	keyed, err := client.NewPartitioner(n)
	if err != nil {
		panic(fmt.Sprintf("gateway: a topic with %d partitions: %v", n, err)) // the broker reports at least 1
	}
	byPartition := map[int32]*share{}
	sticky := rand.Int32N(n)
	for _, r := range recs {
		p := sticky
		if r.Key != nil {
			p = keyed.Partition(r.Key)
		}
		s := byPartition[p]
		if s == nil {
			s = &share{partition: p}
			byPartition[p] = s
		}
		s.recs = append(s.recs, r)
	}
	shares := make([]*share, 0, len(byPartition))
	for _, s := range byPartition {
		shares = append(shares, s)
	}
	slices.SortFunc(shares, func(a, b *share) int { return cmp.Compare(a.partition, b.partition) })
	return shares
}

// admitShares admits the byte rate of every partition written, each
// under the QoS of the credential writing there; on refusal it has
// answered 429 and returns the code.
func (c *call) admitShares(claims *ocap.Claims, shares []*share) api.Code {
	for _, s := range shares {
		scope := scoped(claims, authz.Request{Topic: c.req.Topic, Partition: s.partition})
		if wait := c.g.rateWait(scope, c.start); wait > 0 {
			return refuseRate(c.ctx, scope, wait, c.start)
		}
	}
	return ""
}

// rateWait admits c's next bytes under the byte rate of its QoS: how
// long until its budget has room, 0 when it has (or no rate applies).
// A credential's produce to one partition, c scoped to it: the topic
// route's shares and the Kafka listener's (kafkaGate.AdmitRate).
func (g *Gateway) rateWait(c *ocap.Claims, now time.Time) time.Duration {
	rate := g.view.QoS(c, now).MaxBytesPerSec
	if rate <= 0 {
		return 0
	}
	_, wait := g.limiter.admit(budgetKey(g.view, c, now), rate, now)
	return wait
}

// chargeShares charges the body's bytes to the budgets of the partitions
// written, split by the size of each partition's own records (keys,
// values, headers; finish charges nothing more). Split by record count,
// one large record beside many empty ones went to its partition for a
// fraction of its size (redteam9 #1: 2 MB in 0.12 s to a partition
// limited to 10,000 B/s).
func (c *call) chargeShares(claims *ocap.Claims, shares []*share) {
	c.charged = c.bytes
	sizes := make([]int, len(shares))
	total := 0
	for i, s := range shares {
		for _, r := range s.recs {
			sizes[i] += recordBytes(r)
		}
		total += sizes[i]
	}
	left := c.bytes
	for i, s := range shares {
		n := c.bytes * len(s.recs) / c.records
		if total > 0 {
			n = int(int64(c.bytes) * int64(sizes[i]) / int64(total))
		}
		if i == len(shares)-1 {
			n = left
		}
		left -= n
		scope := scoped(claims, authz.Request{Topic: c.req.Topic, Partition: s.partition})
		if rate := c.g.view.QoS(scope, c.start).MaxBytesPerSec; rate > 0 {
			c.g.limiter.take(budgetKey(c.g.view, scope, c.start), rate, n, c.start)
		}
	}
}

// writeShares produces every share to its partition, concurrently, and
// records each outcome. Never cancelled: a write cancelled on its way
// could still land, unseen.
func (g *Gateway) writeShares(topic string, shares []*share) {
	for _, s := range shares {
		for _, r := range s.recs {
			r.Offset = -1 // kgo sets a written record's offset; one it failed stays -1 (writtenOffsets)
		}
	}
	var wg sync.WaitGroup
	for _, s := range shares {
		wg.Go(func() {
			_, s.err = g.broker.Produce(context.Background(), topic, s.partition, s.recs)
		})
	}
	wg.Wait()
	if g.afterProduce != nil {
		g.afterProduce()
	}
}

// answerShares answers 200 with where the records went, or the first
// failed partition's error with every partition's outcome.
func (c *call) answerShares(shares []*share) api.Code {
	resp := api.TopicProduceResponse{Count: c.records, Partitions: make([]api.PartitionProduced, 0, len(shares))}
	var failed *share
	outcomes := make([]map[string]any, 0, len(shares))
	for _, s := range shares {
		if s.err != nil {
			if failed == nil {
				failed = s
			}
			outcome := map[string]any{"partition": s.partition, "count": len(s.recs), "written": false, "error": broker.Public(s.err)}
			if written := writtenOffsets(s.recs); len(written) > 0 {
				// Some of its records landed before one failed (redteam9
				// #3: a 600 KB record written, the 900 KB after it refused,
				// reported as nothing written).
				outcome["written_count"], outcome["written_offsets"] = len(written), written
			}
			outcomes = append(outcomes, outcome)
			continue
		}
		p := api.PartitionProduced{Partition: s.partition, BaseOffset: s.recs[0].Offset, LastOffset: s.recs[len(s.recs)-1].Offset, Count: len(s.recs)}
		resp.Partitions = append(resp.Partitions, p)
		outcomes = append(outcomes, map[string]any{"partition": p.Partition, "count": p.Count, "written": true, "base_offset": p.BaseOffset, "last_offset": p.LastOffset})
	}
	if failed != nil {
		c.bytes, c.records = 0, 0 // charged already; a failed produce moved nothing the metrics count
		return c.topicBrokerFailure(failed.err, fmt.Sprintf("partition %d: ", failed.partition), outcomes)
	}
	body, _ := json.Marshal(resp)
	writeJSONBody(c.ctx, body)
	return ""
}

// recordBytes is a record's payload: key, value and headers.
func recordBytes(r *kgo.Record) int {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// writtenOffsets are the offsets of the records of a failed share that
// Kafka acknowledged (writeShares marked every record -1 first).
func writtenOffsets(recs []*kgo.Record) []int64 {
	var out []int64
	for _, r := range recs {
		if r.Offset >= 0 {
			out = append(out, r.Offset)
		}
	}
	return out
}

// topicBrokerFailure answers a broker error of a topic produce as the
// per-partition route does, the message after where (the partition that
// failed, or ""), with outcomes (nil: nothing was written) as
// details.partitions.
func (c *call) topicBrokerFailure(err error, where string, outcomes []map[string]any) api.Code {
	var details map[string]any
	suffix := "; nothing was written"
	if outcomes != nil {
		details = map[string]any{"partitions": outcomes}
		suffix = "; other partitions may have been written: details.partitions says which (a produce across partitions is not atomic)"
	}
	code, problem := refusedRecords(err)
	switch {
	case errors.Is(err, broker.ErrUnknownTopicOrPartition):
		code, problem = api.CodeNotFound, "unknown topic or partition"
	case code != "":
	case errors.Is(err, broker.ErrBrokerUnavailable) || errors.Is(err, context.DeadlineExceeded):
		code, problem = api.CodeUnavailable, broker.Public(err)
		setRetryAfter(c.ctx, time.Second)
	default:
		code, problem = api.CodeBrokerError, broker.Public(err)
	}
	writeError(c.ctx, code, where+problem+suffix, details)
	return code
}
