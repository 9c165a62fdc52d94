package kafkaclients

import (
	"fmt"
	"testing"
	"time"

	"github.com/capgate/capgate/e2e/sdk"
)

// TestKgoGroupConsumes: three kgo members of one group (each protocol)
// split 12 partitions through the listener, every partition owned by
// exactly one of them in capgate, and every record produced is polled.
func TestKgoGroupConsumes(t *testing.T) {
	for _, proto := range []protocol{kip848, cooperativeSticky} {
		t.Run(proto.String(), func(t *testing.T) {
			s := Start(t, Options{Partitions: 12})
			cred := s.ClientCredential(t, "g")
			var ms []*groupMember
			for i := range 3 {
				ms = append(ms, joinGroup(t, s, fmt.Sprintf("c%d", i+1), "g", cred, proto))
			}
			sdk.Eventually(t, 20*time.Second, "3 members settled", func() (bool, string) { return settled(t, s, "g", 3) })
			for p := range int32(12) {
				produceDirect(t, s, "orders", p, 5)
			}
			sdk.Eventually(t, 20*time.Second, "every record polled", func() (bool, string) {
				l := ledgerOf(ms...)
				return l.count() == 60, fmt.Sprintf("%d of 60 records", l.count())
			})
			for p, offs := range ledgerOf(ms...) {
				for off, who := range offs {
					if len(who) != 1 {
						t.Errorf("orders/%d@%d polled by %v", p, off, who)
					}
				}
			}
		})
	}
}
