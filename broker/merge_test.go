package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// heldFetches holds every Fetch the cluster gets until the test releases
// it, and hands the test each request as it arrives: the test decides
// when a merged exchange is in flight, and what it carried.
type heldFetches struct {
	seen    chan *kmsg.FetchRequest
	mu      sync.Mutex
	release []chan struct{}
}

func holdFetches(t *testing.T, e *Embedded) *heldFetches {
	h := &heldFetches{seen: make(chan *kmsg.FetchRequest, 16)}
	cl := e.Cluster()
	cl.ControlKey(kmsg.Fetch.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		cl.KeepControl()
		rel := make(chan struct{})
		h.mu.Lock()
		h.release = append(h.release, rel)
		h.mu.Unlock()
		h.seen <- kreq.(*kmsg.FetchRequest)
		cl.SleepControl(func() { <-rel })
		return nil, nil, false // the cluster answers it as usual
	})
	t.Cleanup(func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, rel := range h.release {
			select {
			case <-rel:
			default:
				close(rel)
			}
		}
	})
	return h
}

// next waits for the next Fetch to reach the cluster and returns its
// partitions as "partition@offset" (topics go by id) and the index to
// release it by.
func (h *heldFetches) next(t *testing.T) (parts []string, n int) {
	t.Helper()
	req := <-h.seen
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			parts = append(parts, fmt.Sprintf("%d@%d", rp.Partition, rp.FetchOffset))
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return parts, len(h.release) - 1
}

func (h *heldFetches) free(n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	close(h.release[n])
}

// mergeClient is a client whose merger reports each fetch it queues.
func mergeClient(t *testing.T, e *Embedded) (*Client, chan struct{}) {
	c := newTestClient(t, e, nil)
	queued := make(chan struct{}, 16)
	c.fetchPools.mergeQueued = func() { queued <- struct{}{} }
	// Queued fetches wait for the exchange the test holds, however long
	// the test takes to release it (TestQueuedFetchWaitsOutASlowExchange
	// tests the bound).
	c.fetchPools.mergeWait = time.Hour
	return c, queued
}

// waitQueued waits until a fetch queued to merge.
func waitQueued(t *testing.T, queued chan struct{}) {
	t.Helper()
	select {
	case <-queued:
	case <-testCtx(t).Done():
		t.Fatal("no fetch queued to merge")
	}
}

type fetched struct {
	res FetchResult
	err error
}

// goFetch runs a fetch on its own goroutine; its outcome arrives on the
// channel.
func goFetch(ctx context.Context, c *Client, req FetchRequest) chan fetched {
	out := make(chan fetched, 1)
	go func() {
		res, err := c.Fetch(ctx, req)
		out <- fetched{res, err}
	}()
	return out
}

// produceEach writes n records to each partition of topic, one batch per
// record, values naming their partition and offset.
func produceEach(t *testing.T, e *Embedded, topic string, partitions int32, n int) {
	t.Helper()
	for p := range partitions {
		for i := range n {
			produceOneBatch(t, e, topic, p, []*kgo.Record{{Value: fmt.Appendf(nil, "%d-%d", p, i)}})
		}
	}
}

// checkOne checks that f read exactly record offset of partition p
// (values from produceEach), decoded or raw.
func checkOne(t *testing.T, f fetched, p int32, offset int64, raw bool) {
	t.Helper()
	if f.err != nil {
		t.Fatalf("partition %d: %v", p, f.err)
	}
	recs := f.res.Records
	if raw {
		recs = decodeBatches(t, f.res.Batches, "t", p, offset)
	}
	want := fmt.Appendf(nil, "%d-%d", p, offset)
	if len(recs) == 0 || recs[0].Offset != offset || !bytes.Equal(recs[0].Value, want) {
		t.Fatalf("partition %d at %d: %d records, first %+v, want value %q", p, offset, len(recs), recs, want)
	}
	if f.res.NextOffset != offset+1 {
		t.Fatalf("partition %d at %d: next offset %d, want %d (cut to its own max bytes)", p, offset, f.res.NextOffset, offset+1)
	}
}

// oneInFlight is a client on a broker holding every Fetch, with one
// fetch (of partition 0, offset 0) held there: fetches of other
// partitions now queue to merge.
type oneInFlight struct {
	e      *Embedded
	c      *Client
	queued chan struct{}
	h      *heldFetches
	first  chan fetched // the fetch in flight
	n      int          // its index in h
}

// startOneInFlight makes a topic "t" of partitions partitions, one
// record each, and a oneInFlight on it.
func startOneInFlight(t *testing.T, partitions int32) *oneInFlight {
	e := startEmbedded(t, EmbeddedConfig{Topics: map[string]int32{"t": partitions}})
	produceEach(t, e, "t", partitions, 1)
	c, queued := mergeClient(t, e)
	f := &oneInFlight{e: e, c: c, queued: queued, h: holdFetches(t, e)}
	f.first = goFetch(testCtx(t), c, FetchRequest{Topic: "t", Partition: 0, MaxBytes: 100})
	_, f.n = f.h.next(t)
	return f
}

// TestMergedFetchCarriesSeveralPartitions: while one fetch is in flight
// to a broker, the fetches that arrive for other partitions of it wait
// and go together in the next Fetch; each gets its own partition's
// records, cut to its own max bytes, and a lone fetch goes at once.
func TestMergedFetchCarriesSeveralPartitions(t *testing.T) {
	e := startEmbedded(t, EmbeddedConfig{Topics: map[string]int32{"t": 4}})
	produceEach(t, e, "t", 4, 3)
	c, queued := mergeClient(t, e)
	h := holdFetches(t, e)

	first := goFetch(testCtx(t), c, FetchRequest{Topic: "t", Partition: 0, Offset: 1, MaxBytes: 1})
	parts, n := h.next(t)
	if len(parts) != 1 || parts[0] != "0@1" {
		t.Fatalf("a lone fetch went as %v", parts)
	}
	var rest []chan fetched
	for p := int32(1); p < 4; p++ {
		rest = append(rest, goFetch(testCtx(t), c, FetchRequest{Topic: "t", Partition: p, Offset: int64(p % 2), MaxBytes: 100, Raw: p == 2}))
		waitQueued(t, queued)
	}
	h.free(n)
	checkOne(t, <-first, 0, 1, false)

	parts, n = h.next(t)
	if fmt.Sprint(parts) != "[1@1 2@0 3@1]" {
		t.Fatalf("the next Fetch carried %v, want the three queued partitions", parts)
	}
	h.free(n)
	for i, ch := range rest {
		p := int32(i + 1)
		checkOne(t, <-ch, p, int64(p%2), p == 2)
	}
	st := c.FetchMergeStats()
	if st.Exchanges.Load() != 1 || st.Parts.Load() != 3 || st.Alone.Load() != 0 || st.Dropped.Load() != 0 {
		t.Fatalf("stats: %d exchanges, %d parts, %d alone, %d dropped; want 1, 3, 0, 0",
			st.Exchanges.Load(), st.Parts.Load(), st.Alone.Load(), st.Dropped.Load())
	}
}

// TestMergedPartitionTooSmallGoesAlone: Kafka serves a batch larger than
// the partition's max bytes whole only for the first partition of a
// request; a later one comes back empty. Such a partition is fetched
// again alone (so it still gets its record), and the size its batch
// needed is remembered: the next merged fetch of it asks for that much.
func TestMergedPartitionTooSmallGoesAlone(t *testing.T) {
	e := startEmbedded(t, EmbeddedConfig{Topics: map[string]int32{"t": 3}})
	produceEach(t, e, "t", 3, 2)
	c, queued := mergeClient(t, e)
	h := holdFetches(t, e)
	st := c.FetchMergeStats()

	for round := range 2 {
		first := goFetch(testCtx(t), c, FetchRequest{Topic: "t", Partition: 0, MaxBytes: 1})
		_, n := h.next(t)
		b := goFetch(testCtx(t), c, FetchRequest{Topic: "t", Partition: 1, MaxBytes: 1})
		waitQueued(t, queued)
		cc := goFetch(testCtx(t), c, FetchRequest{Topic: "t", Partition: 2, MaxBytes: 1, Raw: true})
		waitQueued(t, queued)
		h.free(n)
		checkOne(t, <-first, 0, 0, false)
		parts, n := h.next(t)
		if fmt.Sprint(parts) != "[1@0 2@0]" {
			t.Fatalf("round %d: merged Fetch carried %v", round, parts)
		}
		h.free(n)
		if round == 0 {
			// Partition 2 (not first, 1 byte asked) came back empty: it
			// goes again alone.
			parts, n := h.next(t)
			if fmt.Sprint(parts) != "[2@0]" {
				t.Fatalf("re-fetch alone carried %v", parts)
			}
			h.free(n)
		}
		checkOne(t, <-b, 1, 0, false)
		checkOne(t, <-cc, 2, 0, true)
		if got := st.Alone.Load(); got != 1 {
			t.Fatalf("round %d: %d fetched again alone, want 1 (the second round asks for what the batch needs)", round, got)
		}
	}
}

// TestMergedFetchCancelledReturnsAtOnce: a fetch carried by a merged
// exchange in flight whose context ends returns at once (the broker has
// not answered) and its part of the answer is dropped unread; the fetch
// that leads the exchange gets its records.
func TestMergedFetchCancelledReturnsAtOnce(t *testing.T) {
	f := startOneInFlight(t, 3)
	c, queued, h, first, n := f.c, f.queued, f.h, f.first, f.n
	lead := goFetch(testCtx(t), c, FetchRequest{Topic: "t", Partition: 1, MaxBytes: 100})
	waitQueued(t, queued)
	ctx, cancel := context.WithCancel(testCtx(t))
	carried := goFetch(ctx, c, FetchRequest{Topic: "t", Partition: 2, MaxBytes: 100, Raw: true})
	waitQueued(t, queued)
	h.free(n)
	checkOne(t, <-first, 0, 0, false)
	parts, n := h.next(t) // the merged exchange, held at the broker
	if len(parts) != 2 {
		t.Fatalf("merged Fetch carried %v", parts)
	}
	cancel()
	got := <-carried // while the broker still holds the exchange
	if !errors.Is(got.err, context.Canceled) || got.res.Batches != nil || got.res.Records != nil {
		t.Fatalf("cancelled carried fetch: %+v, %v; want no data and context.Canceled", got.res, got.err)
	}
	h.free(n)
	checkOne(t, <-lead, 1, 0, false)
	if d := c.FetchMergeStats().Dropped.Load(); d != 1 {
		t.Fatalf("%d parts dropped unread, want 1", d)
	}
	checkMergersIdle(t, c)
}

// TestMergedFetchLeaderCancelled: the fetch leading a merged exchange
// whose context ends returns at once (it cuts the exchange); the fetch it
// carried goes again on its own and gets its records.
func TestMergedFetchLeaderCancelled(t *testing.T) {
	f := startOneInFlight(t, 3)
	c, queued, h, first, n := f.c, f.queued, f.h, f.first, f.n
	ctx, cancel := context.WithCancel(testCtx(t))
	lead := goFetch(ctx, c, FetchRequest{Topic: "t", Partition: 1, MaxBytes: 100})
	waitQueued(t, queued)
	carried := goFetch(testCtx(t), c, FetchRequest{Topic: "t", Partition: 2, MaxBytes: 100})
	waitQueued(t, queued)
	h.free(n)
	checkOne(t, <-first, 0, 0, false)
	if parts, _ := h.next(t); len(parts) != 2 {
		t.Fatalf("merged Fetch carried %v", parts)
	}
	cancel()
	if got := <-lead; !errors.Is(got.err, context.Canceled) || got.res.Records != nil {
		t.Fatalf("cancelled leader: %+v, %v; want no data and context.Canceled", got.res, got.err)
	}
	parts, n := h.next(t) // the carried fetch, again, alone
	if fmt.Sprint(parts) != "[2@0]" {
		t.Fatalf("after the leader's cancellation: %v", parts)
	}
	h.free(n)
	checkOne(t, <-carried, 2, 0, false)
	checkMergersIdle(t, c)
}

// TestMergedFetchesUnderRace: many goroutines fetch partitions of one
// broker at once, some cancelled at random; every fetch not cancelled
// gets exactly its own partition's record, whatever it was merged with
// (run with -race: the shared answers and the hand-offs).
func TestMergedFetchesUnderRace(t *testing.T) {
	e := startEmbedded(t, EmbeddedConfig{Topics: map[string]int32{"t": 6}})
	produceEach(t, e, "t", 6, 4)
	c := newTestClient(t, e, nil)
	rng := rand.New(rand.NewPCG(17, 3))
	type job struct {
		p      int32
		offset int64
		raw    bool
		cancel bool
		bytes  int32
	}
	var jobs []job
	for range 400 {
		jobs = append(jobs, job{p: rng.Int32N(6), offset: rng.Int64N(4), raw: rng.IntN(2) == 0, cancel: rng.IntN(8) == 0, bytes: 1 + rng.Int32N(300)})
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(jobs))
	sem := make(chan struct{}, 24)
	for _, j := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ctx, cancel := context.WithCancel(testCtx(t))
			defer cancel()
			if j.cancel {
				cancel()
			}
			res, err := c.Fetch(ctx, FetchRequest{Topic: "t", Partition: j.p, Offset: j.offset, MaxBytes: j.bytes, Raw: j.raw})
			defer res.Release()
			if j.cancel {
				if !errors.Is(err, context.Canceled) || res.Records != nil || res.Batches != nil {
					errs <- fmt.Errorf("cancelled fetch: %v, %d records, %d bytes; want context.Canceled and nothing", err, len(res.Records), len(res.Batches))
				}
				return
			}
			if err != nil {
				errs <- err
				return
			}
			recs := res.Records
			if j.raw {
				p := kmsg.NewFetchResponseTopicPartition()
				p.RecordBatches = res.Batches
				fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Offset: j.offset, Topic: "t", Partition: j.p}, &p, kgo.DefaultDecompressor(), nil)
				recs = fp.Records
			}
			want := fmt.Appendf(nil, "%d-%d", j.p, j.offset)
			if len(recs) == 0 || recs[0].Offset != j.offset || !bytes.Equal(recs[0].Value, want) {
				errs <- fmt.Errorf("partition %d at %d: got %d records (%v), want %q", j.p, j.offset, len(recs), recs, want)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	st := c.FetchMergeStats()
	t.Logf("merged exchanges %d carrying %d fetches, %d again alone, %d dropped", st.Exchanges.Load(), st.Parts.Load(), st.Alone.Load(), st.Dropped.Load())
	checkMergersIdle(t, c)
}

// checkMergersIdle checks that, with no fetch running, every broker's
// merger has given back every slot and queues nothing: a slot not given
// back would make every later fetch queue (or go beyond the bound).
func checkMergersIdle(t *testing.T, c *Client) {
	t.Helper()
	for addr, bp := range *c.fetchPools.byAddr.Load() {
		if bp.merge == nil {
			continue
		}
		bp.merge.mu.Lock()
		busy, queued := bp.merge.busy, len(bp.merge.queue)
		bp.merge.mu.Unlock()
		if busy != 0 || queued != 0 {
			t.Errorf("broker %s: %d exchanges still hold a slot, %d fetches queued; want none", addr, busy, queued)
		}
	}
}

// TestCutBatches: a merged partition's answer is cut to its own max
// bytes: the first batch whole however large, then whole batches while
// they all fit.
func TestCutBatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	a, b, c := encodeBatch(0, 3, rng), encodeBatch(3, 1, rng), encodeBatch(4, 2, rng)
	all := slices.Concat(a, b, c)
	for _, tc := range []struct {
		limit int32
		want  []byte
	}{
		{1, a},
		{int32(len(a)), a},
		{int32(len(a) + len(b) - 1), a},
		{int32(len(a) + len(b)), slices.Concat(a, b)},
		{int32(len(all)), all},
		{1 << 20, all},
	} {
		if got := cutBatches(all, tc.limit); !bytes.Equal(got, tc.want) {
			t.Errorf("limit %d: %d bytes, want %d", tc.limit, len(got), len(tc.want))
		}
	}
	if got := cutBatches(all[:len(a)+5], 1<<20); !bytes.Equal(got, a) {
		t.Errorf("a partial batch after the first: kept %d bytes, want %d", len(got), len(a))
	}
	if got := firstBatchSize(all); got != int32(len(a)) {
		t.Errorf("first batch size %d, want %d", got, len(a))
	}
}

// TestMergeKeepsOnePartitionsFetchesSideBySide: a fetch whose partition
// is already queued cannot share that fetch's request, so it does not
// queue behind it: it goes at once, while the exchange that made the
// first one queue is still in flight (concurrent readers of one
// partition are not serialized by merging).
func TestMergeKeepsOnePartitionsFetchesSideBySide(t *testing.T) {
	e := startEmbedded(t, EmbeddedConfig{Topics: map[string]int32{"t": 2}})
	produceEach(t, e, "t", 2, 2)
	c, queued := mergeClient(t, e)
	h := holdFetches(t, e)

	first := goFetch(testCtx(t), c, FetchRequest{Topic: "t", Partition: 0, MaxBytes: 100})
	_, n0 := h.next(t)
	second := goFetch(testCtx(t), c, FetchRequest{Topic: "t", Partition: 1, Offset: 0, MaxBytes: 100})
	waitQueued(t, queued)
	third := goFetch(testCtx(t), c, FetchRequest{Topic: "t", Partition: 1, Offset: 1, MaxBytes: 100})
	parts, n := h.next(t) // while the first is still held
	if fmt.Sprint(parts) != "[1@1]" {
		t.Fatalf("the second fetch of partition 1 went as %v", parts)
	}
	h.free(n)
	checkOne(t, <-third, 1, 1, false)
	h.free(n0)
	checkOne(t, <-first, 0, 0, false)
	parts, n = h.next(t)
	if fmt.Sprint(parts) != "[1@0]" {
		t.Fatalf("the queued fetch went as %v", parts)
	}
	h.free(n)
	checkOne(t, <-second, 1, 0, false)
}

// TestMergeDoesNotQueueOnePartitionAlone: when a broker's recent fetches
// are all of one partition (one partition per broker, read by many),
// there is nothing to merge with: a fetch goes at once beside the one in
// flight instead of queueing behind it.
func TestMergeDoesNotQueueOnePartitionAlone(t *testing.T) {
	e := startEmbedded(t, EmbeddedConfig{Topics: map[string]int32{"t": 1}})
	produceEach(t, e, "t", 1, 2)
	c, _ := mergeClient(t, e)
	h := holdFetches(t, e)
	first := goFetch(testCtx(t), c, FetchRequest{Topic: "t", Offset: 0, MaxBytes: 100})
	_, n0 := h.next(t)
	second := goFetch(testCtx(t), c, FetchRequest{Topic: "t", Offset: 1, MaxBytes: 100})
	parts, n := h.next(t) // while the first is still held
	if fmt.Sprint(parts) != "[0@1]" {
		t.Fatalf("the second fetch went as %v", parts)
	}
	h.free(n)
	checkOne(t, <-second, 0, 1, false)
	h.free(n0)
	checkOne(t, <-first, 0, 0, false)
	if q := c.FetchMergeStats().Queued.Load(); q != 0 {
		t.Fatalf("%d fetches queued, want none", q)
	}
}

// TestMergeQueueHoldsNoCancelledFetches: fetches that queue behind an
// exchange in flight and are cancelled there (a client that asks and
// hangs up, again and again, while the broker is slow to answer) do not
// pile up in the broker's queue until that exchange ends: what the queue
// holds stays bounded by the fetches still waiting, not by how many came
// and went.
func TestMergeQueueHoldsNoCancelledFetches(t *testing.T) {
	f := startOneInFlight(t, 3)
	c, queued, h, first, n := f.c, f.queued, f.h, f.first, f.n
	const gone = 50
	for i := range gone {
		ctx, cancel := context.WithCancel(testCtx(t))
		out := goFetch(ctx, c, FetchRequest{Topic: "t", Partition: 1 + int32(i%2), MaxBytes: 100})
		waitQueued(t, queued)
		cancel()
		if got := <-out; !errors.Is(got.err, context.Canceled) {
			t.Fatalf("cancelled queued fetch: %v", got.err)
		}
	}
	bp, err := c.fetchPools.get(f.e.Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	bp.merge.mu.Lock()
	held := len(bp.merge.queue)
	bp.merge.mu.Unlock()
	if held > 1 {
		t.Fatalf("the queue holds %d fetches after %d came and were cancelled (none waits): want at most 1", held, gone)
	}
	h.free(n)
	checkOne(t, <-first, 0, 0, false)
	checkMergersIdle(t, c)
}

// TestQueuedFetchWaitsOutASlowExchange: one exchange in flight to a
// broker that does not answer (a half-open connection, a cold read) must
// not hold the fetches of other partitions queued behind it for its whole
// request timeout: past merge_wait_max a queued fetch goes on a
// connection of its own and gets its record while the slow one is still
// at the broker (before the bound, it waited up to request_timeout and a
// half — 15 s by default).
func TestQueuedFetchWaitsOutASlowExchange(t *testing.T) {
	f := startOneInFlight(t, 2)
	bp, err := f.c.fetchPools.get(f.e.Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	bp.merge.wait = 20 * time.Millisecond // read by fetches that queue from now on

	other := goFetch(testCtx(t), f.c, FetchRequest{Topic: "t", Partition: 1, MaxBytes: 100})
	waitQueued(t, f.queued)
	parts, n := f.h.next(t) // the queued fetch, gone on its own while partition 0's is held
	if fmt.Sprint(parts) != "[1@0]" {
		t.Fatalf("the fetch that waited out the slow exchange went as %v, want [1@0]", parts)
	}
	f.h.free(n)
	checkOne(t, <-other, 1, 0, false)
	select {
	case <-f.first:
		t.Fatal("the slow exchange answered before it was released")
	default:
	}
	if got := f.c.FetchMergeStats().WaitedOut.Load(); got != 1 {
		t.Fatalf("waited out: %d, want 1", got)
	}
	f.h.free(f.n)
	checkOne(t, <-f.first, 0, 0, false)
	checkMergersIdle(t, f.c)
}
