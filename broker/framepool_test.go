package broker

import (
	"bytes"
	"testing"
)

func TestFrameClasses(t *testing.T) {
	for _, c := range []struct{ size, class int }{
		{0, -1}, {64<<10 - 1, -1}, {64 << 10, 0}, {64<<10 + 1, 1}, {128 << 10, 1}, {1 << 20, 4}, {256 << 20, 12}, {256<<20 + 1, -1},
	} {
		if got := frameClass(c.size); got != c.class {
			t.Errorf("frameClass(%d) = %d, want %d", c.size, got, c.class)
		}
		if c.class >= 0 {
			if f := getFrame(c.size); len(*f) != c.size || cap(*f) != framePoolMin<<c.class {
				t.Errorf("getFrame(%d): len %d cap %d", c.size, len(*f), cap(*f))
			}
		}
	}
}

// TestReleasedAnswerIsReused: a released raw answer's buffer serves the
// next large fetch, and that fetch's batches are its own.
func TestReleasedAnswerIsReused(t *testing.T) {
	e := startEmbedded(t, EmbeddedConfig{Topics: map[string]int32{"t": 1}})
	// Snappy: the 40 KiB records of one repeated byte shrink so much that
	// the first fetch reads all 40, and the second reads the next ones.
	c := newTestClient(t, e, func(cfg *Config) { cfg.ProduceCompression = CompressionSnappy })
	big := makeRecords(0, 40)
	for i := range big {
		big[i].Value = bytes.Repeat([]byte{byte(i)}, 40<<10)
	}
	for i := range big {
		produce(t, c, "t", 0, big[i:i+1])
	}
	first, err := c.Fetch(testCtx(t), FetchRequest{Topic: "t", Raw: true, MaxBytes: 100 << 10})
	if err != nil || first.frame == nil || cap(*first.frame) < framePoolMin {
		t.Fatalf("first fetch: %v, frame %v, %d bytes of batches", err, first.frame != nil, len(first.Batches))
	}
	firstNext := first.NextOffset
	first.Release()
	if first.Batches != nil || first.frame != nil {
		t.Fatal("Release left the answer reachable")
	}
	more := makeRecords(int(firstNext), 40)
	for i := range more {
		more[i].Value = bytes.Repeat([]byte{byte(100 + i)}, 40<<10)
		produce(t, c, "t", 0, more[i:i+1])
	}
	big = append(big[:firstNext], more...)
	second, err := c.Fetch(testCtx(t), FetchRequest{Topic: "t", Raw: true, Offset: firstNext, MaxBytes: 100 << 10})
	if err != nil {
		t.Fatal(err)
	}
	recs := decodeBatches(t, second.Batches, "t", 0, firstNext)
	if len(recs) == 0 || recs[0].Offset != firstNext || !bytes.Equal(recs[0].Value, big[firstNext].Value) {
		t.Fatalf("second fetch after reuse: %d records from %d", len(recs), firstNext)
	}
	second.Release()
}
