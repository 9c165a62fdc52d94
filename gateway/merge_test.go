package gateway

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/api"
)

// heldKafkaFetches holds every Fetch the harness's cluster gets until the
// test releases it, and reports each as "partition@offset" lists.
type heldKafkaFetches struct {
	seen    chan []string
	mu      sync.Mutex
	release []chan struct{}
}

func holdKafkaFetches(t *testing.T, h *harness) *heldKafkaFetches {
	k := &heldKafkaFetches{seen: make(chan []string, 16)}
	cl := h.kafka.Cluster()
	cl.ControlKey(kmsg.Fetch.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		cl.KeepControl()
		var parts []string
		for _, rt := range kreq.(*kmsg.FetchRequest).Topics {
			for _, rp := range rt.Partitions {
				parts = append(parts, fmt.Sprintf("%d@%d", rp.Partition, rp.FetchOffset))
			}
		}
		rel := make(chan struct{})
		k.mu.Lock()
		k.release = append(k.release, rel)
		k.mu.Unlock()
		k.seen <- parts
		cl.SleepControl(func() { <-rel })
		return nil, nil, false
	})
	t.Cleanup(func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		for _, rel := range k.release {
			select {
			case <-rel:
			default:
				close(rel)
			}
		}
	})
	return k
}

// next waits for the next Fetch at the cluster: its partitions and the
// index to free it by.
func (k *heldKafkaFetches) next() ([]string, int) {
	parts := <-k.seen
	k.mu.Lock()
	defer k.mu.Unlock()
	return parts, len(k.release) - 1
}

func (k *heldKafkaFetches) free(n int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	close(k.release[n])
}

// TestMergedFetchOneHolderRevoked: two holders' fetches of different
// partitions go to the broker in one Kafka Fetch (a third holder's fetch
// was in flight when they came); one holder is revoked while that Fetch
// is still at the broker. The revoked holder gets its 409 at once — the
// broker has not answered, and the gateway acknowledges the fence — and
// never data; the other holder gets its record. Both ways round: the
// revoked fetch is the one that sends the merged Fetch (its leader), or
// one it carries.
func TestMergedFetchOneHolderRevoked(t *testing.T) {
	for _, revokeLeader := range []bool{false, true} {
		t.Run(fmt.Sprintf("revoke leader %v", revokeLeader), func(t *testing.T) {
			// The held Fetch holds the other holder's queued: it must not
			// wait it out (broker.merge_wait_max) before the test frees it.
			h := newHarness(t, func(c *Config) { c.Broker.MergeWaitMax = c.Broker.RequestTimeout })
			for p := range int32(3) {
				h.produce(p, 1)
			}
			k := holdKafkaFetches(t, h)
			holder := func(p int32) string {
				c := capClaims(p)
				c.Subject = fmt.Sprintf("member-%d", p)
				tok, _ := h.mint(c)
				return tok
			}
			get := func(p int32) chan response {
				tok := holder(p)
				out := make(chan response, 1)
				go func() { out <- h.get(tok, recordsPath(p, "offset=0&max_bytes=1000")) }()
				return out
			}
			stats := h.gw.broker.FetchMergeStats()

			first := get(0)
			if parts, _ := k.next(); fmt.Sprint(parts) != "[0@0]" {
				t.Fatalf("first Fetch: %v", parts)
			}
			leader := get(1)
			waitFor(t, "partition 1's fetch queued", func() bool { return stats.Queued.Load() == 1 })
			carried := get(2)
			waitFor(t, "partition 2's fetch queued", func() bool { return stats.Queued.Load() == 2 })
			k.free(0)
			if r := <-first; r.status != http.StatusOK {
				t.Fatalf("first: %d %s", r.status, r.body)
			}
			parts, merged := k.next()
			if fmt.Sprint(parts) != "[1@0 2@0]" {
				t.Fatalf("merged Fetch: %v, want both holders' partitions", parts)
			}

			revoked, other, p, q := carried, leader, int32(2), int32(1)
			if revokeLeader {
				revoked, other, p, q = leader, carried, 1, 2
			}
			seq := h.sync.push(api.SyncResponse{Fences: []api.Fence{{Group: "g", Topic: testTopic, Partition: p, Epoch: 2}}})
			r := <-revoked // the merged Fetch is still held at the broker
			expectError(t, r, http.StatusConflict, api.CodeCapabilityRevoked)
			if strings.Contains(string(r.body), "records") {
				t.Fatalf("revoked holder got data: %s", r.body)
			}
			h.sync.waitAck(t, seq)
			k.free(merged)
			if revokeLeader {
				// The carried fetch goes again on its own.
				parts, n := k.next()
				if fmt.Sprint(parts) != fmt.Sprintf("[%d@0]", q) {
					t.Fatalf("after the leader's revocation: %v", parts)
				}
				k.free(n)
			}
			got := <-other
			if got.status != http.StatusOK {
				t.Fatalf("other holder: %d %s", got.status, got.body)
			}
			recs := got.fetch(t).Records
			if len(recs) != 1 || recs[0].Offset != 0 || got.fetch(t).NextOffset != 1 {
				t.Fatalf("other holder (partition %d): %s", q, got.body)
			}
			if !revokeLeader && stats.Dropped.Load() != 1 {
				t.Fatalf("%d parts dropped unread, want 1 (the revoked holder's)", stats.Dropped.Load())
			}
		})
	}
}
