package kafkaclients

import (
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/capgate/capgate/e2e/sdk"
)

// TestMailingListKgo is the mailing-list scenario with unmodified kgo
// consumers through the listener, for KIP-848 and cooperative-sticky:
// three members consume 12 partitions of a live stream, a fourth joins.
// Exactly three partitions move (the fourth's), no other partition is
// revoked from anyone, every record produced is polled, and no record is
// polled twice (kgo commits what it polled before it gives a partition up,
// and the next holder starts right there).
func TestMailingListKgo(t *testing.T) {
	for _, proto := range []protocol{kip848, cooperativeSticky} {
		t.Run(proto.String(), func(t *testing.T) {
			s := Start(t, Options{Partitions: 12})
			cred := s.ClientCredential(t, "ml")
			prod := startProducer(t, s, 10*time.Millisecond)
			var old []*groupMember
			for i := range 3 {
				old = append(old, joinGroup(t, s, fmt.Sprintf("c%d", i+1), "ml", cred, proto))
			}
			sdk.Eventually(t, 20*time.Second, "3 members settled", func() (bool, string) { return settled(t, s, "ml", 3) })
			sdk.Eventually(t, 20*time.Second, "3 clients settled", func() (bool, string) { return clientsSettled(12, old...) })
			settledWith := map[string][]int32{}
			for _, m := range old {
				settledWith[m.name] = m.Assigned()
				if n := len(m.Revoked()); n > 0 { // the first split revoked from c1; start counting now
					m.mu.Lock()
					m.revoked = nil
					m.mu.Unlock()
				}
			}
			joined := time.Now()
			newcomer := joinGroup(t, s, "c4", "ml", cred, proto)
			sdk.Eventually(t, 20*time.Second, "4 members settled", func() (bool, string) { return settled(t, s, "ml", 4) })
			sdk.Eventually(t, 20*time.Second, "4 clients settled", func() (bool, string) { return clientsSettled(12, append(old, newcomer)...) })
			sdk.Eventually(t, 20*time.Second, "the newcomer consuming 3 partitions", func() (bool, string) {
				got := map[int32]bool{}
				for _, r := range newcomer.Records() {
					got[r.Partition] = true
				}
				return len(got) == 3, fmt.Sprintf("newcomer polled from %d partitions, assigned %v", len(got), newcomer.Assigned())
			})
			t.Logf("%s: join → newcomer polling its 3 partitions: %s", proto, time.Since(joined).Round(time.Millisecond))

			var revoked []int32
			for _, m := range old {
				revoked = append(revoked, m.Revoked()...)
				for _, p := range m.Revoked() {
					if !slices.Contains(settledWith[m.name], p) {
						t.Errorf("%s revoked %d it did not own", m.name, p)
					}
				}
			}
			sort.Slice(revoked, func(i, j int) bool { return revoked[i] < revoked[j] })
			for _, m := range old {
				now := m.Assigned()
				m.mu.Lock()
				t.Logf("%s: settled with %v, now %v, revoked %v, lost %v", m.name, settledWith[m.name], now, m.revoked, m.lost)
				m.mu.Unlock()
			}
			if moved := newcomer.Assigned(); !slices.Equal(revoked, moved) {
				t.Fatalf("revoked from the old members %v, the newcomer got %v: exactly its 3 partitions must move", revoked, moved)
			}

			prod.Stop()
			all := append(old, newcomer)
			want := prod.total()
			sdk.Eventually(t, 20*time.Second, "every record polled", func() (bool, string) {
				l := ledgerOf(all...)
				return int64(l.count()) == want, fmt.Sprintf("%d of %d records polled", l.count(), want)
			})
			dups := 0
			for p, offs := range ledgerOf(all...) {
				for off, who := range offs {
					if len(who) > 1 {
						dups++
						t.Errorf("orders/%d@%d polled by %v", p, off, who)
					}
				}
			}
			t.Logf("%s: %d records, %d polled twice, revoked %v", proto, want, dups, revoked)
		})
	}
}
