package broker

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// produceBatches writes n batches to topic/partition, batch i holding
// sizes[i % len(sizes)] records, numbered on from first.
func produceBatches(t *testing.T, e *Embedded, topic string, partition int32, n int, sizes []int) int {
	t.Helper()
	next := 0
	for i := range n {
		k := sizes[i%len(sizes)]
		produceOneBatch(t, e, topic, partition, makeRecords(next, k))
		next += k
	}
	return next
}

// sameAnswer fetches req from both clients and fails unless the answers
// are the same: raw bytes, decoded records, next offset, high watermark.
func sameAnswer(t *testing.T, ahead, plain *Client, req FetchRequest) FetchResult {
	t.Helper()
	got, err := ahead.Fetch(testCtx(t), req)
	if err != nil {
		t.Fatalf("fetch %+v with read-ahead: %v", req, err)
	}
	want, err := plain.Fetch(testCtx(t), req)
	if err != nil {
		t.Fatalf("fetch %+v without: %v", req, err)
	}
	defer want.Release()
	if !bytes.Equal(got.Batches, want.Batches) || got.NextOffset != want.NextOffset ||
		got.HighWatermark != want.HighWatermark || len(got.Records) != len(want.Records) {
		t.Fatalf("fetch at %d (max %d, raw %t): read-ahead answered %d bytes %d records next %d hw %d, Kafka %d bytes %d records next %d hw %d",
			req.Offset, req.MaxBytes, req.Raw, len(got.Batches), len(got.Records), got.NextOffset, got.HighWatermark,
			len(want.Batches), len(want.Records), want.NextOffset, want.HighWatermark)
	}
	for i := range got.Records {
		checkRecord(t, got.Records[i], want.Records[i], want.Records[i].Offset)
	}
	return got
}

// TestReadAheadAnswersAsKafkaDoes reads a partition of batches of 1 to 5
// records in a row, at sizes from one byte to several batches, raw and
// decoded, and from offsets inside batches: every answer from the
// read-ahead is the very answer Kafka gives to the same fetch, and all
// but a few came without a Kafka exchange.
func TestReadAheadAnswersAsKafkaDoes(t *testing.T) {
	e := startEmbedded(t, EmbeddedConfig{Topics: map[string]int32{"t": 1}})
	total := produceBatches(t, e, "t", 0, 60, []int{1, 3, 5, 2})
	ahead := newTestClient(t, e, nil)
	plain := newTestClient(t, e, func(c *Config) { c.ReadAheadBytes = 0 })
	fetches := observeFetches(e)

	rng := rand.New(rand.NewPCG(7, 17))
	var calls int
	for offset := int64(0); offset < int64(total); calls++ {
		req := FetchRequest{Topic: "t", Offset: offset, MaxBytes: []int32{1, 100, 300, 700}[calls%4], Raw: calls%2 == 0}
		res := sameAnswer(t, ahead, plain, req)
		res.Release()
		// Mostly where the last answer ended; now and then inside the
		// batch after (a client that skips a record).
		offset = res.NextOffset
		if rng.IntN(5) == 0 {
			offset++
		}
	}
	st := ahead.FetchAheadStats()
	// The plain client sent one Fetch per call; the read-ahead client the
	// rest. Its fills are the only Fetches it sent besides its first.
	fromAhead := fetches.Hits() - calls
	t.Logf("%d calls: read-ahead client sent %d Fetches (%d fills, %d hits)", calls, fromAhead, st.Fills.Load(), st.Hits.Load())
	if st.Hits.Load() < int64(calls)-5 || int64(fromAhead) > 5 {
		t.Fatalf("%d calls in a row: %d answered from read-ahead, %d Fetches to Kafka; want all but a few from read-ahead", calls, st.Hits.Load(), fromAhead)
	}
	if held := st.Held.Load(); held <= 0 || held > 64<<20 {
		t.Fatalf("held %d bytes", held)
	}
}

// TestReadAheadNotForARandomReader: fetches that do not continue where
// one of the partition's last few ended go to Kafka as asked, never
// larger: a reader hopping through the partition 7 offsets at a time.
func TestReadAheadNotForARandomReader(t *testing.T) {
	e := startEmbedded(t, EmbeddedConfig{Topics: map[string]int32{"t": 1}})
	total := produceBatches(t, e, "t", 0, 40, []int{1})
	ahead := newTestClient(t, e, nil)
	plain := newTestClient(t, e, func(c *Config) { c.ReadAheadBytes = 0 })
	fetches := observeFetches(e)
	for i := range total {
		offset := int64(i * 7 % total) // 7 and 40 are coprime: every offset once
		res := sameAnswer(t, ahead, plain, FetchRequest{Topic: "t", Offset: offset, MaxBytes: 1, Raw: true})
		res.Release()
	}
	if st := ahead.FetchAheadStats(); st.Fills.Load()+st.Hits.Load() != 0 {
		t.Fatalf("reads never in a row: %d fills, %d hits", st.Fills.Load(), st.Hits.Load())
	}
	if n := fetches.Hits(); n != 2*total {
		t.Fatalf("%d Fetches reached Kafka for %d calls of each client", n, total)
	}
}

// TestReadAheadReadsOnPastTheChunk: a reader that reaches the end of
// what was read ahead, while new records arrive, gets them from Kafka
// (nothing is served above the high watermark a chunk came with).
func TestReadAheadReadsOnPastTheChunk(t *testing.T) {
	e := startEmbedded(t, EmbeddedConfig{Topics: map[string]int32{"t": 1}})
	produceBatches(t, e, "t", 0, 10, []int{1})
	ahead := newTestClient(t, e, nil)
	plain := newTestClient(t, e, func(c *Config) { c.ReadAheadBytes = 0 })
	offset := int64(0)
	for ; offset < 10; offset++ {
		res := sameAnswer(t, ahead, plain, FetchRequest{Topic: "t", Offset: offset, MaxBytes: 1})
		res.Release()
	}
	res, err := ahead.Fetch(testCtx(t), FetchRequest{Topic: "t", Offset: 10, MaxBytes: 1})
	if err != nil || len(res.Records) != 0 || res.NextOffset != 10 || res.HighWatermark != 10 {
		t.Fatalf("at the high watermark: %v, %d records, next %d, hw %d", err, len(res.Records), res.NextOffset, res.HighWatermark)
	}
	for i := 10; i < 20; i++ {
		produceOneBatch(t, e, "t", 0, makeRecords(i, 1))
	}
	for ; offset < 20; offset++ {
		got := sameAnswer(t, ahead, plain, FetchRequest{Topic: "t", Offset: offset, MaxBytes: 1})
		if len(got.Records) != 1 || got.Records[0].Offset != offset {
			t.Fatalf("at %d: %d records", offset, len(got.Records))
		}
		got.Release()
	}
}

// TestReadAheadStaysInItsBudget: readers of more partitions than the
// budget holds chunks of get correct answers, and the oldest chunks go.
func TestReadAheadStaysInItsBudget(t *testing.T) {
	e := startEmbedded(t, EmbeddedConfig{Topics: map[string]int32{"t": 4}})
	for p := range int32(4) {
		produceBatches(t, e, "t", p, 30, []int{2})
	}
	const chunk = 4 << 10
	ahead := newTestClient(t, e, func(c *Config) { c.ReadAheadBytes, c.ReadAheadMaxBytes = chunk, 2*chunk })
	plain := newTestClient(t, e, func(c *Config) { c.ReadAheadBytes = 0 })
	next := make([]int64, 4)
	for round := range 60 {
		p := int32(round / 3 % 4) // three fetches of a partition, then the next
		res := sameAnswer(t, ahead, plain, FetchRequest{Topic: "t", Partition: p, Offset: next[p], MaxBytes: 1, Raw: round%3 == 0})
		next[p] = res.NextOffset
		res.Release()
		if held := ahead.FetchAheadStats().Held.Load(); held > 2*chunk {
			t.Fatalf("held %d bytes, budget %d", held, 2*chunk)
		}
	}
	st := ahead.FetchAheadStats()
	if st.Evicted.Load() == 0 || st.Hits.Load() == 0 {
		t.Fatalf("4 partitions in turn over a budget of 2 chunks: %d evicted, %d hits", st.Evicted.Load(), st.Hits.Load())
	}
	t.Logf("fills %d hits %d evicted %d", st.Fills.Load(), st.Hits.Load(), st.Evicted.Load())
}

// TestReadAheadAcrossChunks: a partition several times read_ahead_bytes,
// of ~1 KiB batches, read in a row at 1 byte and at sizes that reach
// past a chunk's end: every answer is Kafka's, byte for byte — a chunk
// that cannot hold all Kafka would send is not answered from.
func TestReadAheadAcrossChunks(t *testing.T) {
	e := startEmbedded(t, EmbeddedConfig{Topics: map[string]int32{"t": 1}})
	for i := range 150 {
		rec := makeRecords(i, 1)
		rec[0].Value = bytes.Repeat([]byte{byte('a' + i%26)}, 1000)
		produceOneBatch(t, e, "t", 0, rec)
	}
	ahead := newTestClient(t, e, func(c *Config) { c.ReadAheadBytes = 16 << 10 })
	plain := newTestClient(t, e, func(c *Config) { c.ReadAheadBytes = 0 })
	offset := int64(0)
	for calls := 0; offset < 150; calls++ {
		res := sameAnswer(t, ahead, plain, FetchRequest{Topic: "t", Offset: offset, MaxBytes: []int32{1, 1, 1, 5000, 1, 12000}[calls%6], Raw: calls%2 == 1})
		offset = res.NextOffset
		res.Release()
	}
	st := ahead.FetchAheadStats()
	if st.Hits.Load() == 0 || st.Fills.Load() < 5 {
		t.Fatalf("150 KiB through 16 KiB read-aheads: %d fills, %d hits", st.Fills.Load(), st.Hits.Load())
	}
	t.Logf("fills %d hits %d", st.Fills.Load(), st.Hits.Load())
}

// fetchSizes records the max bytes of every Fetch the cluster gets.
func fetchSizes(e *Embedded) func() []int32 {
	var mu sync.Mutex
	var sizes []int32
	cl := e.Cluster()
	cl.ControlKey(kmsg.Fetch.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		cl.KeepControl()
		req := kreq.(*kmsg.FetchRequest)
		mu.Lock()
		sizes = append(sizes, req.MaxBytes)
		mu.Unlock()
		return nil, nil, false
	})
	return func() []int32 {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(sizes)
	}
}

// TestReadAheadGrowsOnlyWithUse: a reader that reads its chunks to the
// end makes the window grow to read_ahead_bytes; one that skips to each
// chunk's end (so the read-ahead serves it nothing) keeps getting the
// smallest fills. What Kafka sends beyond what is read stays bounded.
func TestReadAheadGrowsOnlyWithUse(t *testing.T) {
	e := startEmbedded(t, EmbeddedConfig{Topics: map[string]int32{"t": 2}})
	produceBatches(t, e, "t", 0, 400, []int{1})
	produceBatches(t, e, "t", 1, 400, []int{1})
	c := newTestClient(t, e, func(c *Config) { c.ReadAheadBytes = 16 << 10 })
	sizes := fetchSizes(e)

	for offset := int64(0); offset < 400; {
		res, err := c.Fetch(testCtx(t), FetchRequest{Topic: "t", Partition: 0, Offset: offset, MaxBytes: 1})
		if err != nil || res.NextOffset != offset+1 {
			t.Fatalf("reader at %d: %v next %d", offset, err, res.NextOffset)
		}
		offset = res.NextOffset
		res.Release()
	}
	if got := slices.Max(sizes()); got != 16<<10 {
		t.Fatalf("a reader of 400 records in a row: largest fill %d, want the window grown to read_ahead_bytes (fills %v)", got, sizes())
	}

	before := len(sizes())
	skipper := func(offset int64) int64 {
		res, err := c.Fetch(testCtx(t), FetchRequest{Topic: "t", Partition: 1, Offset: offset, MaxBytes: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer res.Release()
		return res.NextOffset
	}
	offset := skipper(skipper(0)) // the second continues the first: a fill
	for range 20 {
		c.ahead.mu.Lock()
		end := c.ahead.parts[tp{"t", 1}].end
		c.ahead.mu.Unlock()
		if end < 0 || end >= 400 {
			break
		}
		offset = skipper(end) // straight to the chunk's end: another fill, nothing read from the last
	}
	for _, size := range sizes()[before:] {
		if size > aheadMinWindow {
			t.Fatalf("a reader skipping to each chunk's end: fills of %v, want none above %d", sizes()[before:], aheadMinWindow)
		}
	}
	t.Logf("skipper at %d after fills %v", offset, sizes()[before:])
}

// TestReadAheadExpiresAndFrees: a chunk is not served past aheadTTL, and
// its bytes go back at the next fill of any partition; closing the
// client frees them all.
func TestReadAheadExpiresAndFrees(t *testing.T) {
	e := startEmbedded(t, EmbeddedConfig{Topics: map[string]int32{"t": 2}})
	produceBatches(t, e, "t", 0, 20, []int{1})
	produceBatches(t, e, "t", 1, 20, []int{1})
	c := newTestClient(t, e, nil)
	var mu sync.Mutex
	now := time.Now()
	c.ahead.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	read := func(p int32, offsets ...int64) {
		for _, o := range offsets {
			res, err := c.Fetch(testCtx(t), FetchRequest{Topic: "t", Partition: p, Offset: o, MaxBytes: 1})
			if err != nil || res.NextOffset != o+1 {
				t.Fatalf("%d at %d: %v next %d", p, o, err, res.NextOffset)
			}
			res.Release()
		}
	}
	st := c.FetchAheadStats()
	read(0, 0, 1, 2) // a fill at 1, a hit at 2
	held := st.Held.Load()
	if st.Fills.Load() != 1 || st.Hits.Load() != 1 || held <= 0 {
		t.Fatalf("fills %d hits %d held %d", st.Fills.Load(), st.Hits.Load(), held)
	}
	mu.Lock()
	now = now.Add(aheadTTL)
	mu.Unlock()
	read(0, 3) // expired: not a hit, a fill again (it continues)
	if st.Hits.Load() != 1 || st.Fills.Load() != 2 {
		t.Fatalf("after the TTL: fills %d hits %d, want the chunk not served", st.Fills.Load(), st.Hits.Load())
	}
	mu.Lock()
	now = now.Add(aheadTTL)
	mu.Unlock()
	read(1, 0, 1) // partition 1's fill drops partition 0's expired chunk
	if got := st.Held.Load(); got != held {
		t.Fatalf("held %d, want one chunk (%d): the expired one freed", got, held)
	}
	c.Close()
	if got := st.Held.Load(); got != 0 {
		t.Fatalf("held %d after Close", got)
	}
}

// TestReadAheadConcurrentReaders: readers of one partition, each in a
// row from its own start, at once (run with -race in CI): every record
// is the one produced at its offset.
func TestReadAheadConcurrentReaders(t *testing.T) {
	e := startEmbedded(t, EmbeddedConfig{Topics: map[string]int32{"t": 1}})
	total := produceBatches(t, e, "t", 0, 120, []int{1, 2})
	want := makeRecords(0, total)
	c := newTestClient(t, e, func(c *Config) { c.ReadAheadBytes = 2 << 10 })
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for offset := int64(w * 7); offset < int64(total); {
				res, err := c.Fetch(testCtx(t), FetchRequest{Topic: "t", Offset: offset, MaxBytes: int32(1 + w*150)})
				if err != nil {
					errs <- err
					return
				}
				for _, r := range res.Records {
					if r.Offset < offset || !bytes.Equal(r.Value, want[r.Offset].Value) {
						errs <- fmt.Errorf("reader %d at %d: record %d value %q", w, offset, r.Offset, r.Value)
						res.Release()
						return
					}
				}
				if res.NextOffset <= offset {
					errs <- fmt.Errorf("reader %d at %d: next %d", w, offset, res.NextOffset)
				}
				offset = res.NextOffset
				res.Release()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if c.FetchAheadStats().Hits.Load() == 0 {
		t.Fatal("no fetch answered from read-ahead")
	}
}

// TestReadAheadTwoReadersOfOnePartition: two readers of one partition
// far apart, fetching in turn, each read mostly from its own chunk
// instead of dropping the other's.
func TestReadAheadTwoReadersOfOnePartition(t *testing.T) {
	e := startEmbedded(t, EmbeddedConfig{Topics: map[string]int32{"t": 1}})
	produceBatches(t, e, "t", 0, 400, []int{1})
	c := newTestClient(t, e, func(c *Config) { c.ReadAheadBytes = 8 << 10 })
	at := []int64{0, 200}
	const calls = 300
	for i := range calls {
		r := i % 2
		res, err := c.Fetch(testCtx(t), FetchRequest{Topic: "t", Offset: at[r], MaxBytes: 1})
		if err != nil || res.NextOffset != at[r]+1 || len(res.Records) != 1 || res.Records[0].Offset != at[r] {
			t.Fatalf("reader %d at %d: %v next %d", r, at[r], err, res.NextOffset)
		}
		at[r] = res.NextOffset
		res.Release()
	}
	st := c.FetchAheadStats()
	if hits := st.Hits.Load(); hits < calls*8/10 {
		t.Fatalf("%d fetches of two readers in turn: %d answered from read-ahead (%d fills)", calls, hits, st.Fills.Load())
	}
}

// TestReadAheadTailSeesNewRecords: a chunk read at the partition's end
// does not answer a fetch that would take it to its end once more was
// written — Kafka has more by then, and a newer high watermark — and
// the fetches it does answer report the newest high watermark seen.
func TestReadAheadTailSeesNewRecords(t *testing.T) {
	e := startEmbedded(t, EmbeddedConfig{Topics: map[string]int32{"t": 1}})
	produceBatches(t, e, "t", 0, 10, []int{1})
	ahead := newTestClient(t, e, nil)
	plain := newTestClient(t, e, func(c *Config) { c.ReadAheadBytes = 0 })
	for offset := range int64(3) { // a fill at 1 reads to the end, 10
		res := sameAnswer(t, ahead, plain, FetchRequest{Topic: "t", Offset: offset, MaxBytes: 1})
		res.Release()
	}
	for i := 10; i < 20; i++ {
		produceOneBatch(t, e, "t", 0, makeRecords(i, 1))
	}
	hits := ahead.FetchAheadStats().Hits.Load()
	// The rest of the chunk (7 batches) fits in 8 KiB: Kafka now sends 17.
	res := sameAnswer(t, ahead, plain, FetchRequest{Topic: "t", Offset: 3, MaxBytes: 8 << 10})
	if res.NextOffset != 20 || res.HighWatermark != 20 {
		t.Fatalf("at 3 after 10 more: next %d hw %d, want 20 and 20", res.NextOffset, res.HighWatermark)
	}
	res.Release()
	if ahead.FetchAheadStats().Hits.Load() != hits {
		t.Fatal("a fetch reaching the chunk's end was answered from it")
	}
	// Inside the chunk: answered from it, with the newest high watermark.
	res = sameAnswer(t, ahead, plain, FetchRequest{Topic: "t", Offset: 4, MaxBytes: 1})
	res.Release()
	if ahead.FetchAheadStats().Hits.Load() != hits+1 {
		t.Fatal("a 1-byte fetch inside the chunk was not answered from it")
	}
}
