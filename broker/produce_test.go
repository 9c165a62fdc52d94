package broker

import (
	"bytes"
	"cmp"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// batchCodecs reads the compression codec (attributes bits 0-2: 0 none,
// 1 gzip, 2 snappy, 3 lz4, 4 zstd) of every record batch in raw.
func batchCodecs(t testing.TB, raw []byte) []int16 {
	t.Helper()
	var out []int16
	for len(raw) > 0 {
		var b kmsg.RecordBatch
		if err := b.ReadFrom(raw); err != nil {
			t.Fatalf("record batch: %v", err)
		}
		out = append(out, b.Attributes&0x07)
		raw = raw[12+int(b.Length):] // base offset and length, then length bytes
	}
	return out
}

// TestProduceCompression: the batches Produce writes carry the codec of
// broker.produce_compression — none by default (kgo's own default is
// snappy, which KafkaJS cannot read: it crashed on batches the gateway
// wrote) — and read back as produced.
func TestProduceCompression(t *testing.T) {
	e := startEmbedded(t, EmbeddedConfig{Topics: map[string]int32{"t": 1}})
	for codec, want := range map[string]int16{"": 0, CompressionNone: 0, CompressionGzip: 1, CompressionSnappy: 2, CompressionLZ4: 3, CompressionZstd: 4} {
		t.Run(cmp.Or(codec, "default"), func(t *testing.T) {
			c := newTestClient(t, e, func(cfg *Config) {
				if codec != "" {
					cfg.ProduceCompression = codec
				}
			})
			recs := makeRecords(0, 20)
			for _, r := range recs {
				r.Value = bytes.Repeat(r.Value, 100) // compressible, so every codec is used
			}
			want0 := string(recs[0].Value)
			base := produce(t, c, "t", 0, recs)
			res, err := c.Fetch(testCtx(t), FetchRequest{Topic: "t", Offset: base, Raw: true})
			if err != nil {
				t.Fatal(err)
			}
			defer res.Release()
			codecs := batchCodecs(t, res.Batches)
			for i, got := range codecs {
				if got != want {
					t.Fatalf("batch %d of %v written with codec %d, want %d (%s)", i, codecs, got, want, cmp.Or(codec, "default"))
				}
			}
			got := decodeBatches(t, res.Batches, "t", 0, base)
			if len(got) != len(recs) || string(got[0].Value) != want0 {
				t.Fatalf("read back %d records, want %d as produced", len(got), len(recs))
			}
		})
	}
}
