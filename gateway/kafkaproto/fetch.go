package kafkaproto

// Behavior: Fetch v4–v12 (topic names; no fetch sessions).
//
//   - Every partition is admitted like an HTTP fetch (admit): refused
//     partitions get the error of the Kafka boundary table (errors.go) and
//     never a byte of data; the others are fetched from their Kafka
//     leaders, one Fetch per leader, concurrently, record batches passed
//     through untouched.
//   - Each admitted partition is registered in the gateway's in-flight
//     registry under its capability: a revocation that refuses it cancels
//     the whole upstream wait and the sync acknowledgement waits until this
//     Fetch is answered. After Kafka answered, every partition is decided
//     again (Recheck) before anything is written: a fence, deny or member
//     revocation that arrived meanwhile refuses it.
//   - MaxWaitMillis is capped by max_wait and by the SASL session's end,
//     MaxBytes by max_fetch_bytes, a partition's bytes by its capability's
//     byte rate; an exhausted rate answers the partition empty with
//     ThrottleMillis set. When the partitions span several Kafka leaders,
//     the first answer carrying data (or an error) ends the others' long
//     polls, so data never waits for another leader's MaxWait.
//   - Sessions: the answer's session id is always 0, so clients keep
//     sending full fetches; a request naming a session (epoch > 0) is
//     answered FETCH_SESSION_ID_NOT_FOUND.

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/broker"
	"github.com/capgate/capgate/ocap"
)

// noRecords is an empty record set: RecordBatches is nullable on the wire
// and librdkafka refuses a null one ("invalid MessageSetSize -1"), so an
// answer without data carries zero bytes, as Kafka's do.
var noRecords = []byte{}

// overCapThrottle is how long a client is asked to wait before fetching
// again a partition refused by the gateway's in-flight caps.
const overCapThrottle = time.Second

// fetchPart is one requested partition on its way through the handler.
type fetchPart struct {
	topic     string
	partition int32
	offset    int64
	maxBytes  int32
	admission
	route broker.Route
	done  func() // in-flight registration, nil when not registered
	out   *kmsg.FetchResponseTopicPartition
}

func handleFetch(c *conn, _ header, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.FetchRequest)
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	if req.SessionEpoch > 0 || req.SessionID != 0 {
		resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
		return resp, nil
	}
	now := time.Now()
	parts := c.admitFetch(req, resp, now)
	rest, data := c.takeReadAhead(req, parts)
	c.fetchUpstream(req, resp, rest, data, now)
	for _, p := range parts {
		if p.done != nil {
			p.done()
		}
	}
	c.hold(resp, parts)
	c.startReadAhead(req, parts)
	return resp, nil
}

// holdMin is the smallest answer counted as held until written, as the
// HTTP routes count theirs (gateway/held.go).
const holdMin = 16 << 10

// hold counts the answer's record bytes as held by the gateway until the
// connection has written it (max_answer_bytes_held, _per_holder: a
// client reading none of its answers on many connections made the
// gateway hold them all until write_timeout). Over a cap the records are
// dropped from the answer, throttled a second: the client fetches them
// again.
func (c *conn) hold(resp *kmsg.FetchResponse, parts []*fetchPart) {
	n := 0
	for _, p := range parts {
		n += len(p.out.RecordBatches)
	}
	if n < holdMin {
		return
	}
	release, code := c.s.gate.Hold(c.principal.Claims, n)
	if code == "" {
		c.afterWrite = append(c.afterWrite, release)
		return
	}
	for _, p := range parts {
		p.out.RecordBatches = noRecords
	}
	resp.ThrottleMillis = max(resp.ThrottleMillis, int32(overCapThrottle.Milliseconds()))
	c.s.gate.Observe(c.principal.Claims, OpFetch, code, 0, time.Now())
}

// admitFetch lays out the response (every requested partition, in order,
// once) and admits each partition; admitted ones are routed and
// registered. A partition named again is left out, as Kafka's broker
// reads a Fetch's partitions into a map and answers each once: served
// once per naming, one small request made the gateway send the same
// records dozens of times (redteam5 #1).
func (c *conn) admitFetch(req *kmsg.FetchRequest, resp *kmsg.FetchResponse, now time.Time) []*fetchPart {
	var parts []*fetchPart
	var seen seenParts
	dropped := false
	resp.Topics = make([]kmsg.FetchResponseTopic, len(req.Topics))
	for i, rt := range req.Topics {
		t := &resp.Topics[i]
		*t = kmsg.NewFetchResponseTopic()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		t.Partitions = make([]kmsg.FetchResponseTopicPartition, 0, len(rt.Partitions)) // appended in place: out stays valid
		for _, rp := range rt.Partitions {
			if seen.again(rt.Topic, rp.Partition) {
				dropped = true
				continue
			}
			t.Partitions = append(t.Partitions, kmsg.NewFetchResponseTopicPartition())
			out := &t.Partitions[len(t.Partitions)-1]
			out.Partition, out.HighWatermark, out.LastStableOffset, out.LogStartOffset = rp.Partition, -1, -1, -1
			out.RecordBatches = noRecords
			p := &fetchPart{topic: rt.Topic, partition: rp.Partition, offset: rp.FetchOffset, maxBytes: rp.PartitionMaxBytes, out: out}
			p.admission = c.admit(rt.Topic, rp.Partition, ocap.OpFetch, rp.FetchOffset, now)
			if p.code == "" {
				p.route, p.code = c.route(rt.Topic, rp.Partition)
			}
			switch {
			case p.renewing: // empty, as under a quota: see admission.renewing
				resp.ThrottleMillis = max(resp.ThrottleMillis, int32(renewThrottle.Milliseconds()))
			case p.code != "":
				out.ErrorCode = c.partitionError(p.code)
				c.s.gate.Observe(p.claims, OpFetch, p.code, 0, now)
			case p.throttle > 0:
				resp.ThrottleMillis = max(resp.ThrottleMillis, int32(p.throttle.Milliseconds()))
			default:
				if p.allowance >= 0 {
					p.maxBytes = int32(min(int64(p.maxBytes), max(p.allowance, 1)))
				}
				parts = append(parts, p)
			}
		}
	}
	if dropped { // a topic all of whose partitions were named before
		resp.Topics = slices.DeleteFunc(resp.Topics, func(t kmsg.FetchResponseTopic) bool { return len(t.Partitions) == 0 })
	}
	return parts
}

// fetchUpstream sends one Fetch per Kafka leader and fills in the
// partitions' answers.
// noWait (data is already there for the answer) sends them without a long
// poll, as a broker answers at once once MinBytes are there.
// A partition over the gateway's in-flight caps (max_inflight_fetches,
// max_inflight_fetches_per_holder: the HTTP routes' 503 and 429) is
// answered empty, the response throttled a second as Kafka throttles a
// client over its quota; the client fetches it again.
func (c *conn) fetchUpstream(req *kmsg.FetchRequest, resp *kmsg.FetchResponse, parts []*fetchPart, noWait bool, now time.Time) {
	if len(parts) == 0 {
		return
	}
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	tracked := make([]*fetchPart, 0, len(parts))
	for _, p := range parts {
		pctx, done, code := c.s.gate.Track(c.s.base, p.claims, p.req, true)
		if code != "" {
			resp.ThrottleMillis = max(resp.ThrottleMillis, int32(overCapThrottle.Milliseconds()))
			c.s.gate.Observe(p.claims, OpFetch, code, 0, now)
			continue
		}
		stop := context.AfterFunc(pctx, cancel) // a revocation of any partition ends the wait
		p.done = func() { stop(); done() }
		tracked = append(tracked, p)
	}
	if parts = tracked; len(parts) == 0 {
		return
	}
	calls := c.leaderCalls(req, parts, now)
	if noWait {
		for _, lc := range calls {
			lc.req.MaxWaitMillis = 0
		}
	}
	for _, lc := range runCalls(ctx, c.s.gate, calls, cancel) {
		if lc.release != nil {
			c.afterWrite = append(c.afterWrite, lc.release) // the answer aliases its buffer until written
		}
		now := time.Now()
		for _, p := range lc.parts {
			c.answerPartition(p, findFetchPartition(lc.resp, p), lc.err, now)
		}
	}
}

// runCalls sends every leader's Fetch concurrently and returns them
// answered. When one answers with data (or an error) while others still
// wait, cancel ends their long polls: data never waits for another
// leader's MaxWait.
func runCalls(ctx context.Context, gate Gate, calls []*leaderCall, cancel context.CancelFunc) []*leaderCall {
	results := make(chan *leaderCall, len(calls))
	for _, lc := range calls {
		go func() {
			lc.resp, lc.release, lc.err = gate.Broker().FetchRawRecycled(ctx, lc.addr, lc.req)
			results <- lc
		}()
	}
	out := make([]*leaderCall, 0, len(calls))
	for pending := len(calls); pending > 0; pending-- {
		lc := <-results
		if pending > 1 && lc.hasData() {
			cancel()
		}
		out = append(out, lc)
	}
	return out
}

// leaderCall is the Fetch to one Kafka leader.
type leaderCall struct {
	addr  string
	req   *kmsg.FetchRequest
	parts []*fetchPart
	resp  *kmsg.FetchResponse
	err   error
	// release hands resp's buffer back; call it once nothing refers to
	// resp (nil when there is none).
	release func()
}

func (lc *leaderCall) hasData() bool {
	if lc.err != nil || lc.resp == nil {
		return lc.err != nil && !errors.Is(lc.err, context.Canceled)
	}
	for _, t := range lc.resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 || len(p.RecordBatches) > 0 {
				return true
			}
		}
	}
	return false
}

// leaderCalls groups the partitions of a client's Fetch by leader into
// Fetch requests, its wait and size capped.
func (c *conn) leaderCalls(req *kmsg.FetchRequest, parts []*fetchPart, now time.Time) []*leaderCall {
	wait := time.Duration(req.MaxWaitMillis) * time.Millisecond
	wait = min(wait, c.s.cfg.MaxWait, max(c.reauthBy.Sub(now), 0))
	maxBytes := req.MaxBytes
	if maxBytes <= 0 || maxBytes > c.s.cfg.MaxFetchBytes {
		maxBytes = c.s.cfg.MaxFetchBytes
	}
	return c.s.leaderCalls(parts, wait, req.MinBytes, maxBytes, req.IsolationLevel)
}

// leaderCalls groups the partitions by leader into Fetch requests.
func (s *Server) leaderCalls(parts []*fetchPart, wait time.Duration, minBytes, maxBytes int32, isolation int8) []*leaderCall {
	byAddr := map[string]*leaderCall{}
	var calls []*leaderCall
	for _, p := range parts {
		lc := byAddr[p.route.Addr]
		if lc == nil {
			up := kmsg.NewPtrFetchRequest()
			up.ReplicaID = -1
			up.MaxWaitMillis = int32(wait.Milliseconds())
			up.MinBytes = minBytes
			up.MaxBytes = maxBytes
			up.IsolationLevel = isolation
			up.SessionID, up.SessionEpoch = 0, -1
			lc = &leaderCall{addr: p.route.Addr, req: up}
			byAddr[p.route.Addr] = lc
			calls = append(calls, lc)
		}
		lc.parts = append(lc.parts, p)
		addFetchPartition(lc.req, p)
	}
	return calls
}

func addFetchPartition(up *kmsg.FetchRequest, p *fetchPart) {
	var t *kmsg.FetchRequestTopic
	for i := range up.Topics {
		if up.Topics[i].Topic == p.topic {
			t = &up.Topics[i]
		}
	}
	if t == nil {
		nt := kmsg.NewFetchRequestTopic()
		nt.Topic, nt.TopicID = p.topic, p.route.TopicID
		up.Topics = append(up.Topics, nt)
		t = &up.Topics[len(up.Topics)-1]
	}
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = p.partition
	rp.CurrentLeaderEpoch = p.route.LeaderEpoch
	rp.FetchOffset = p.offset
	rp.LogStartOffset = -1
	rp.PartitionMaxBytes = p.maxBytes
	t.Partitions = append(t.Partitions, rp)
}

// answerPartition decides p again and copies Kafka's answer up into the
// response (err: the leader's Fetch failed; up nil: not answered).
func (c *conn) answerPartition(p *fetchPart, up *kmsg.FetchResponseTopicPartition, err error, now time.Time) {
	if code := c.s.gate.Recheck(p.claims, p.req, now); code != "" {
		if c.renewing(p, code) {
			return // answered empty: see admission.renewing
		}
		p.out.ErrorCode = c.partitionError(code)
		c.s.gate.Observe(p.claims, OpFetch, code, 0, now)
		return
	}
	switch {
	case err != nil && errors.Is(err, context.Canceled):
		return // answered empty: the client fetches again
	case err != nil:
		p.out.ErrorCode = kerr.LeaderNotAvailable.Code
		c.refreshRoute(p)
		return
	case up == nil:
		p.out.ErrorCode = kerr.NotLeaderForPartition.Code
		return
	}
	c.copyPartition(p, up)
	c.s.gate.Observe(p.claims, OpFetch, "", len(up.RecordBatches), now)
}

// copyPartition passes Kafka's answer through; leader errors become
// NOT_LEADER_OR_FOLLOWER after a metadata refresh (the gateway, not the
// client, follows Kafka's leaders).
func (c *conn) copyPartition(p *fetchPart, up *kmsg.FetchResponseTopicPartition) {
	out := p.out
	out.ErrorCode = up.ErrorCode
	out.HighWatermark, out.LastStableOffset, out.LogStartOffset = up.HighWatermark, up.LastStableOffset, up.LogStartOffset
	out.AbortedTransactions = up.AbortedTransactions
	out.PreferredReadReplica = -1
	out.RecordBatches = up.RecordBatches
	if out.RecordBatches == nil {
		out.RecordBatches = noRecords
	}
	switch up.ErrorCode {
	case kerr.NotLeaderForPartition.Code, kerr.FencedLeaderEpoch.Code, kerr.UnknownLeaderEpoch.Code,
		kerr.UnknownTopicID.Code, kerr.LeaderNotAvailable.Code, kerr.OffsetNotAvailable.Code:
		out.ErrorCode = kerr.NotLeaderForPartition.Code
		out.RecordBatches = noRecords
		c.refreshRoute(p)
	}
}

func findFetchPartition(resp *kmsg.FetchResponse, p *fetchPart) *kmsg.FetchResponseTopicPartition {
	if resp == nil {
		return nil
	}
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if t.Topic != p.topic && (t.Topic != "" || t.TopicID != p.route.TopicID) {
			continue
		}
		for j := range t.Partitions {
			if t.Partitions[j].Partition == p.partition {
				return &t.Partitions[j]
			}
		}
	}
	return nil
}

// route finds the Kafka leader of a partition; its failure is a capgate
// code for the boundary table.
func (c *conn) route(topic string, partition int32) (broker.Route, api.Code) {
	r, err := c.s.gate.Broker().Route(c.ctx, topic, partition, false)
	switch {
	case err == nil:
		return r, ""
	case errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.UnknownTopicID):
		return r, api.CodeNotFound
	}
	return r, api.CodeUnavailable
}

func (c *conn) refreshRoute(p *fetchPart) {
	ctx, cancel := context.WithTimeout(c.s.base, c.s.cfg.RequestTimeout)
	defer cancel()
	_, _ = c.s.gate.Broker().Route(ctx, p.topic, p.partition, true)
}
