package kafkaproto

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func batch(base int64, records int32) []byte {
	b := kmsg.RecordBatch{FirstOffset: base, Magic: 2, LastOffsetDelta: records - 1, NumRecords: records, Records: make([]byte, 10)}
	b.Length = int32(len(b.AppendTo(nil)) - 12)
	return b.AppendTo(nil)
}

// TestNextOffset: the offset a client asks next is after the last whole
// v2 batch; a batch cut at MaxBytes does not count, old formats give up.
func TestNextOffset(t *testing.T) {
	two := append(batch(10, 5), batch(15, 3)...)
	cut := append(batch(10, 5), batch(15, 3)[:30]...)
	old := batch(10, 5)
	old[16] = 1
	for _, c := range []struct {
		name    string
		batches []byte
		from    int64
		want    int64
		ok      bool
	}{
		{"empty", nil, 7, 7, true},
		{"two batches", two, 10, 18, true},
		{"last cut", cut, 10, 15, true},
		{"first starts below the offset asked", batch(10, 5), 12, 15, true},
		{"a lone batch cut", batch(10, 5)[:40], 10, 10, true},
		{"message format v1", old, 10, 0, false},
	} {
		got, ok := nextOffset(c.batches, c.from)
		if got != c.want || ok != c.ok {
			t.Errorf("%s: nextOffset = %d, %v; want %d, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}
