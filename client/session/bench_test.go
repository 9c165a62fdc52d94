package session

import (
	"testing"
	"time"

	"github.com/capgate/capgate/api"
)

// BenchmarkFetchDeliverCycle measures the session's cost per fetched batch:
// one FetchDone and one Polled per op across 12 partitions (and 2,000:
// every step walks the partitions, so a wide consumer's batches cost
// more; NextDeadline is asked after each step, as the driver does).
// Baseline is the bare work of moving the same batch through a queue.
func BenchmarkFetchDeliverCycle(b *testing.B) {
	b.Run("session", func(b *testing.B) { benchFetchDeliver(b, 12) })
	b.Run("session/partitions=2000", func(b *testing.B) { benchFetchDeliver(b, 2000) })
	b.Run("baseline", func(b *testing.B) {
		payload := make([]int64, 100)
		var queue []Batch
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			queue = append(queue, Batch{Partition: Partition{"orders", int32(i % 12)}, Records: 100, Bytes: 10000, Payload: payload})
			out := append([]Batch(nil), queue...)
			queue = queue[:0]
			_ = out
		}
	})
}

func benchFetchDeliver(b *testing.B, partitions int32) {
	cfg := testConfig()
	cfg.FullChecks = false
	s := New(cfg)
	var grants []api.Grant
	for i := range partitions {
		grants = append(grants, grant(Partition{"orders", i}, 1, 0, "cap", t0.Add(time.Hour)))
	}
	pending := all[Fetch](s.Step(Joined{Now: t0, Response: api.JoinResponse{MemberID: "m", MemberToken: "t", Grants: grants}}))
	payload := make([]int64, 100)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f := pending[0]
		pending = pending[1:]
		acts := s.Step(FetchDone{Now: t0, ID: f.ID, Partition: f.Partition, Records: 100, Bytes: 10000, Next: f.Offset + 100, Payload: payload})
		pending = append(pending, all[Fetch](acts)...)
		acts = s.Step(Polled{Now: t0})
		pending = append(pending, all[Fetch](acts)...)
		_ = s.NextDeadline()
	}
}
