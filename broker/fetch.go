package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FetchRequest names one partition and where to read it from.
type FetchRequest struct {
	Topic     string
	Partition int32
	Offset    int64
	// MaxBytes caps the record bytes returned; it is clamped to
	// Config.MaxFetchBytes and <= 0 means that ceiling. As in Kafka, the
	// first batch is returned whole even if it is larger.
	MaxBytes int32
	// MaxWait is the broker-side long poll (MaxWaitMillis) when nothing is
	// at Offset yet; the broker answers as soon as one byte is (MinBytes 1).
	MaxWait time.Duration
	// Raw returns the record batches exactly as the broker sent them,
	// without decoding or decompressing anything.
	Raw bool
	// Waiting, if set, is called once when the fetch found nothing and is
	// about to long poll (a gateway then watches for its client leaving).
	Waiting func()
}

// FetchResult is what one fetch read.
type FetchResult struct {
	// Records are the decoded records at or after the requested offset
	// (not Raw). Control records are dropped.
	Records []*kgo.Record
	// Batches are the broker's record batches, untouched, cut after the
	// last complete batch (Raw). The first batch may start below the
	// requested offset: Kafka answers with whole batches, and so do we;
	// whoever decodes them skips records below the offset they asked for.
	// Nothing is checked either (CRCs are the consumer's to verify).
	// Batches aliases the response buffer, reused after Release.
	Batches []byte
	// NextOffset is the offset to fetch next: after the last record
	// returned, or the request offset if nothing was.
	NextOffset     int64
	HighWatermark  int64
	LogStartOffset int64

	frame      *[]byte      // the answer Records and Batches alias; see Release
	shared     *sharedFrame // instead of frame: an answer several results alias
	firstBatch int32        // size of the answer's first batch, whole or not
}

// Release hands the answer's buffer back for reuse: call it once nothing
// will read Records or Batches any more (a copy of them is fine). A
// result never released is left to the garbage collector.
func (r *FetchResult) Release() {
	if r.shared != nil {
		r.shared.release()
	}
	putFrame(r.frame)
	r.frame, r.shared, r.Records, r.Batches = nil, nil, nil, nil
}

// Fetch reads one partition from its leader: a Fetch request (no fetch
// session, read_uncommitted) on a leased connection, so a fetch to a known
// leader is one round trip. Stale leaders and unreachable brokers are
// retried after a metadata refresh, for up to RequestTimeout and within
// ctx.
//
// A fetch with MaxWait first asks for what is there (MaxWait 0) on a
// connection that never waits; only when nothing is there does it long
// poll for MaxWait, calling req.Waiting first, on a connection of the
// broker's long-poll pool (long_poll_connections_per_broker). If that pool
// stays full for MaxWait, the fetch answers what is there by then. So a
// fetch of data that exists never waits behind long polls.
//
// Cancelling ctx returns at once, even during the broker's long poll, with
// an error that errors.Is ctx.Err(); the connection is dropped. Other
// failures are *OffsetOutOfRangeError (with the partition's current bounds),
// or a *BrokerError, which errors.Is ErrUnknownTopicOrPartition or
// ErrBrokerUnavailable where those apply.
func (c *Client) Fetch(ctx context.Context, req FetchRequest) (FetchResult, error) {
	if req.Topic == "" || req.Partition < 0 {
		return FetchResult{}, newBrokerError("fetch", kerr.UnknownTopicOrPartition)
	}
	wait := req.MaxWait
	req.MaxWait = 0
	res, err := c.fetchFromLeader(ctx, &req)
	if err != nil || wait <= 0 || !res.empty(req.Offset) {
		return res, err
	}
	res.Release()
	if req.Waiting != nil {
		req.Waiting()
	}
	req.MaxWait = wait
	return c.fetchFromLeader(ctx, &req)
}

// empty reports an answer that moved nothing: no record, no batch, no
// offset skipped.
func (r *FetchResult) empty(offset int64) bool {
	return len(r.Records) == 0 && len(r.Batches) == 0 && r.NextOffset <= offset
}

// fetchFromLeader is one fetch on the leader, retried on leader errors.
func (c *Client) fetchFromLeader(ctx context.Context, req *FetchRequest) (FetchResult, error) {
	var res FetchResult
	err := c.onLeader(ctx, req.Topic, req.Partition, func(r route) error {
		var err error
		res, err = c.fetchOnce(ctx, r, req)
		return err
	})
	if errors.Is(err, kerr.OffsetOutOfRange) {
		err = c.outOfRange(ctx, *req)
	}
	if err != nil {
		return FetchResult{}, wrapError("fetch", err)
	}
	return res, nil
}

// fetchOnce answers req from the read-ahead (ahead.go) when it may, else
// issues the Fetch to r's broker and shapes the answer (fetchToBroker).
func (c *Client) fetchOnce(ctx context.Context, r route, req *FetchRequest) (FetchResult, error) {
	if c.ahead.eligible(req, c.cfg.MaxFetchBytes) {
		return c.fetchAhead(ctx, r, req)
	}
	res, err := c.fetchToBroker(ctx, r, req)
	if c.ahead != nil && err == nil {
		// Hits never report a high watermark below one reported before.
		c.ahead.advance(req, 0, res.HighWatermark, false)
	}
	return res, err
}

// fetchToBroker is fetchOnce past the read-ahead: a Kafka exchange. A
// fetch that does not wait, of at most mergeMaxBytes, may merge with
// others (fetchShort); the rest go alone (fetchAlone).
func (c *Client) fetchToBroker(ctx context.Context, r route, in *FetchRequest) (FetchResult, error) {
	// A copy on the heap: a merged fetch's request outlives this call's
	// frame in the merge queue. Made here, on the way to Kafka, so that
	// the caller's request stays on its stack and a fetch answered from
	// the read-ahead allocates none.
	req := new(FetchRequest)
	*req = *in
	bp, err := c.fetchPools.get(r.addr)
	if err != nil {
		return FetchResult{}, err
	}
	if req.MaxWait <= 0 && bp.merge != nil && clampBytes(req.MaxBytes, c.cfg.MaxFetchBytes) <= mergeMaxBytes {
		return c.fetchShort(ctx, bp, r, req)
	}
	return c.fetchAlone(ctx, bp, r, req, nil)
}

// fetchAlone issues the Fetch of req alone: from the short pool when it
// does not wait, else from the long-poll pool, waiting for a slot at most
// MaxWait (then it asks for what is there now). ended, if set, runs once
// the exchange is over, before the answer is shaped.
func (c *Client) fetchAlone(ctx context.Context, bp *brokerPools, r route, req *FetchRequest, ended func()) (FetchResult, error) {
	pool, giveUp := bp.short, (<-chan time.Time)(nil)
	if req.MaxWait > 0 {
		t := time.NewTimer(req.MaxWait)
		defer t.Stop()
		pool, giveUp = bp.long, t.C
	}
	conn, reused, err := pool.acquire(ctx, giveUp)
	if errors.Is(err, errNoSlot) {
		if ended != nil { // unreachable today (merged fetches never give up), but a slot is a slot
			ended()
		}
		now := *req
		now.MaxWait = 0
		return c.fetchOnce(ctx, r, &now)
	}
	if err != nil {
		if ended != nil {
			ended()
		}
		return FetchResult{}, err
	}
	kreq := conn.request()
	c.fillFetchRequest(kreq, r, req, deadlineOf(ctx))
	// The broker has RequestTimeout beyond the long poll to answer (up to
	// half of it more: fetchConn.fetch).
	deadline := time.Now().Add(time.Duration(kreq.MaxWaitMillis)*time.Millisecond + c.cfg.RequestTimeout)
	resp, frame, err := conn.fetch(ctx, kreq, deadline, c.cfg.RequestTimeout/2)
	if err != nil && reused && ctx.Err() == nil && isTransportError(err) {
		// A pooled connection the broker closed meanwhile: once more,
		// on a new connection.
		if conn, err = pool.replace(ctx, conn); err != nil {
			if ended != nil {
				ended()
			}
			return FetchResult{}, err
		}
		resp, frame, err = conn.fetch(ctx, kreq, deadline, c.cfg.RequestTimeout/2)
	}
	pool.release(conn, err == nil)
	if ended != nil {
		ended()
	}
	if err != nil {
		return FetchResult{}, err
	}
	res, err := c.answer(resp, req)
	if err != nil {
		putFrame(frame)
		return FetchResult{}, err
	}
	res.frame = frame
	return res, nil
}

// answer finds the partition in resp and shapes it.
func (c *Client) answer(resp *kmsg.FetchResponse, req *FetchRequest) (FetchResult, error) {
	if resp.ErrorCode != 0 {
		return FetchResult{}, kerr.ErrorForCode(resp.ErrorCode)
	}
	p := findPartition(resp, req.Partition)
	if p == nil {
		return FetchResult{}, fmt.Errorf("fetch response without partition %d", req.Partition)
	}
	if p.ErrorCode != 0 {
		return FetchResult{}, kerr.ErrorForCode(p.ErrorCode)
	}
	return c.shape(p, req)
}

// deadlineMargin is how long before ctx's deadline we want the broker's
// answer: enough for the response to travel back.
const deadlineMargin = 20 * time.Millisecond

// deadlineOf returns how long ctx has left, or -1 without a deadline.
func deadlineOf(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return max(time.Until(dl), 0)
	}
	return -1
}

// fetchRequest builds the Fetch (see fillFetchRequest) in a request of
// its own.
func (c *Client) fetchRequest(r route, req *FetchRequest, left time.Duration) *kmsg.FetchRequest {
	kreq := kmsg.NewPtrFetchRequest()
	topic := kmsg.NewFetchRequestTopic()
	topic.Partitions = []kmsg.FetchRequestTopicPartition{kmsg.NewFetchRequestTopicPartition()}
	kreq.Topics = []kmsg.FetchRequestTopic{topic}
	c.fillFetchRequest(kreq, r, req, left)
	return kreq
}

// fillFetchRequest fills in kreq, which has kmsg's defaults and one topic
// of one partition, as the Fetch of req on route r. The long poll is cut
// to end deadlineMargin before ctx's deadline (left >= 0), so that a
// deadline ends the poll with an empty answer rather than a dropped
// connection.
func (c *Client) fillFetchRequest(kreq *kmsg.FetchRequest, r route, req *FetchRequest, left time.Duration) {
	maxBytes := req.MaxBytes
	if maxBytes <= 0 || maxBytes > c.cfg.MaxFetchBytes {
		maxBytes = c.cfg.MaxFetchBytes
	}
	wait := req.MaxWait
	if left >= 0 {
		wait = min(wait, left-deadlineMargin)
	}
	maxWait := max(0, min(wait.Milliseconds(), 1<<31-1))

	kreq.MaxWaitMillis = int32(maxWait)
	kreq.MinBytes = 1
	kreq.MaxBytes = maxBytes
	kreq.IsolationLevel = 0 // read_uncommitted
	kreq.SessionID = 0
	kreq.SessionEpoch = -1 // no fetch session
	topic := &kreq.Topics[0]
	topic.Topic = req.Topic   // sent below v13
	topic.TopicID = r.topicID // sent from v13
	part := &topic.Partitions[0]
	part.Partition = req.Partition
	part.CurrentLeaderEpoch = r.epoch
	part.FetchOffset = req.Offset
	part.PartitionMaxBytes = maxBytes
}

// findPartition returns the answer for partition; we asked for one.
func findPartition(resp *kmsg.FetchResponse, partition int32) *kmsg.FetchResponseTopicPartition {
	for i := range resp.Topics {
		ps := resp.Topics[i].Partitions
		for j := range ps {
			if ps[j].Partition == partition {
				return &ps[j]
			}
		}
	}
	return nil
}

// shape turns a partition answer into a FetchResult, raw or decoded.
func (c *Client) shape(p *kmsg.FetchResponseTopicPartition, req *FetchRequest) (FetchResult, error) {
	res := FetchResult{HighWatermark: p.HighWatermark, LogStartOffset: p.LogStartOffset, firstBatch: firstBatchSize(p.RecordBatches)}
	if req.Raw {
		res.Batches, res.NextOffset = wholeBatches(p.RecordBatches, req.Offset)
		return res, nil
	}
	if p.ErrorCode == 0 {
		if recs, next, ok := decodePlain(p.RecordBatches, req.Topic, req.Partition, req.Offset); ok {
			res.Records, res.NextOffset = recs, max(next, req.Offset)
			return res, nil
		}
	}
	opts := kgo.ProcessFetchPartitionOpts{Offset: req.Offset, Topic: req.Topic, Partition: req.Partition}
	fp, next := kgo.ProcessFetchPartition(opts, p, c.decompressor, nil)
	if fp.Err != nil && len(fp.Records) == 0 {
		return FetchResult{}, &BrokerError{Op: "fetch", Err: fmt.Errorf("decode records: %w", fp.Err)}
	}
	res.Records, res.NextOffset = fp.Records, max(next, req.Offset)
	return res, nil
}

// outOfRange answers OFFSET_OUT_OF_RANGE with the partition's bounds.
func (c *Client) outOfRange(ctx context.Context, req FetchRequest) error {
	earliest, latest, err := c.offsets(ctx, req.Topic, req.Partition)
	if err != nil {
		return err
	}
	return &OffsetOutOfRangeError{Offset: req.Offset, Earliest: earliest, Latest: latest}
}
