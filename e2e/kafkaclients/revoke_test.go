package kafkaclients

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/sdk"
)

// TestAdminRevokeStopsKgoPartition: an admin revoke of a partition a kgo
// KIP-848 consumer is long-polling answers once every gateway applied the
// fence — by then the gateway has cancelled the consumer's in-flight
// Fetch — and no record of the partition written after the answer
// reaches the consumer until capgate grants the partition again (a new
// epoch, announced to kgo as a new assignment).
func TestAdminRevokeStopsKgoPartition(t *testing.T) {
	s := Start(t, Options{Partitions: 4})
	cred := s.ClientCredential(t, "rv")
	m := joinGroup(t, s, "solo", "rv", cred, kip848, kgo.FetchMaxWait(5*time.Second))
	sdk.Eventually(t, 20*time.Second, "the member consuming all 4", func() (bool, string) {
		ok, why := settled(t, s, "rv", 1)
		return ok && len(m.Assigned()) == 4, why
	})
	produceDirect(t, s, "orders", 2, 3)
	sdk.Eventually(t, 10*time.Second, "the first records polled", func() (bool, string) {
		return len(m.Records()) == 3, fmt.Sprint(len(m.Records()))
	})
	before := grepCount(metrics(t, s), "capgate_gateway_fetches_cancelled_total")

	// The member is now long-polling (5 s) every partition; revoke one.
	var out coordinator.RevokeResponse
	if status, raw := s.Admin(t, http.MethodPost, "/v1/admin/groups/rv/partitions/orders/2/revoke", coordinator.RevokeRequest{Reason: "test"}, &out); status != http.StatusOK {
		t.Fatalf("revoke: %d %s", status, raw)
	}
	answered := time.Now()
	if after := grepCount(metrics(t, s), "capgate_gateway_fetches_cancelled_total"); after <= before {
		t.Fatalf("the in-flight Fetch was not cancelled before the revoke answered (cancelled %v → %v)", before, after)
	}
	_, hw, err := s.Broker.Offsets(context.Background(), s.Topic, 2)
	if err != nil {
		t.Fatal(err)
	}
	produceDirect(t, s, "orders", 2, 3)
	sdk.Eventually(t, 20*time.Second, "partition 2 granted again and its new records polled", func() (bool, string) {
		recs, _, granted := m.polledSince(2, answered)
		return len(recs) >= 3 && granted.After(answered), fmt.Sprintf("%d records, granted %v", len(recs), granted)
	})
	recs, at, granted := m.polledSince(2, answered)
	for i, r := range recs {
		if r.Offset >= hw && at[i].Before(granted) {
			t.Errorf("orders/2@%d polled at %s, before the partition was granted again at %s (revoke answered at %s)",
				r.Offset, at[i].Format(time.StampMicro), granted.Format(time.StampMicro), answered.Format(time.StampMicro))
		}
	}
	t.Logf("revoke to epoch %d answered; regranted %s later", out.Epoch, granted.Sub(answered).Round(time.Millisecond))
}
