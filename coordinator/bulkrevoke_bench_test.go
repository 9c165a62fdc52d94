package coordinator_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// BenchmarkBulkMemberRevoke: the admin answer of revoking a member that
// holds 10,000 partitions (POST .../members/{id}/revoke) on the badger
// store — the machine's step and the persist of the 10,000 partition
// records, the part of BENCHMARKS.md §3's bulk fence before any gateway
// is involved. Each iteration revokes a member of its own group (joined
// with the timer stopped), so every revoke fences 10,000 partitions.
func BenchmarkBulkMemberRevoke(b *testing.B) {
	const partitions = 10_000
	e := newBenchEnv(b, map[string]int32{"bulk": partitions})
	h := e.start(b)
	b.ReportAllocs()
	var took time.Duration
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		g := fmt.Sprintf("g%d", i)
		creds := h.clientCredential(b, []string{g}, []string{"bulk"})
		m := h.join(b, g, creds, api.JoinRequest{Topics: []string{"bulk"}})
		if len(m.grants) != partitions {
			b.Fatalf("member holds %d partitions, want %d", len(m.grants), partitions)
		}
		b.StartTimer()
		start := time.Now()
		var resp coordinator.MemberRevokeResponse
		h.call(b, "POST", "/v1/admin/groups/"+g+"/members/"+m.id+"/revoke", e.adminToken, nil, 200, &resp)
		took += time.Since(start)
		if resp.Fenced != partitions {
			b.Fatalf("fenced %d, want %d", resp.Fenced, partitions)
		}
	}
	b.ReportMetric(float64(took.Milliseconds())/float64(b.N), "answer-ms")
}
