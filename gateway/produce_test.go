package gateway

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
)

func TestProduceThenFetch(t *testing.T) {
	h := newHarness(t, nil)
	h.produce(2, 2)
	prod, _ := h.mint(withOps(capClaims(2), "produce"))
	body := `{"records":[{"key":"azE=","value":"djE=","headers":[{"key":"h","value":"eA=="}]},{"value":"djI="}]}`
	r := h.do(http.MethodPost, recordsURL(2), prod, strings.NewReader(body), "Content-Type", "application/json")
	var pr api.ProduceResponse
	if err := json.Unmarshal(r.body, &pr); err != nil || r.status != http.StatusOK || pr.BaseOffset != 2 || pr.Count != 2 {
		t.Fatalf("produce: %d %s", r.status, r.body)
	}
	fetch, _ := h.mint(capClaims(2))
	f := h.get(fetch, recordsPath(2, "offset=2")).fetch(t)
	if len(f.Records) != 2 || string(f.Records[0].Key) != "k1" || string(f.Records[0].Value) != "v1" ||
		f.Records[0].Headers[0].Key != "h" || string(f.Records[0].Headers[0].Value) != "x" ||
		f.Records[1].Key != nil || string(f.Records[1].Value) != "v2" || f.NextOffset != 4 {
		t.Fatalf("fetched %+v", f)
	}
	c := withOps(capClaims(99), "produce")
	unknown, _ := h.mint(c)
	expectError(t, h.do(http.MethodPost, recordsURL(99), unknown, strings.NewReader(`{"records":[{"value":"eA=="}]}`)), http.StatusNotFound, api.CodeNotFound)
}

// TestRevocationAckWaitsForProduceInFlight is the race of a holder whose
// capability is being revoked while its produce is on its way: the
// revocation was acknowledged (and the admin's revoke returned, "every
// gateway is safe") while the produce, admitted before, was still to
// land. A produce is now registered in flight like a fetch: the ack waits
// until Kafka answered it, and it is not cancelled (a write cancelled on
// its way could still land, unseen).
func TestRevocationAckWaitsForProduceInFlight(t *testing.T) {
	h := newHarness(t, nil)
	prod, _ := h.mint(withOps(capClaims(0), "produce"))
	answered, release := make(chan struct{}), make(chan struct{})
	h.gw.afterProduce = func() {
		close(answered)
		<-release
	}
	done := make(chan response, 1)
	go func() {
		done <- h.do(http.MethodPost, recordsURL(0), prod, strings.NewReader(`{"records":[{"value":"eA=="}]}`), "Content-Type", "application/json")
	}()
	<-answered
	var finished atomic.Bool
	acked := make(chan bool, 1)
	var fenceSeq atomic.Uint64
	h.sync.setOnPoll(func(after uint64) {
		if s := fenceSeq.Load(); s != 0 && after == s {
			select {
			case acked <- finished.Load():
			default:
			}
		}
	})
	fenceSeq.Store(h.sync.currentSeq() + 1)
	h.sync.push(api.SyncResponse{Fences: []api.Fence{{Group: "g", Topic: testTopic, Partition: 0, Epoch: 2}}})
	waitFor(t, "the fence applied", func() bool { return h.gw.view.Fence("g", testTopic, 0) == 2 })
	finished.Store(true)
	close(release)
	if r := <-done; r.status != http.StatusOK {
		t.Fatalf("the produce Kafka answered before the fence: %d %s, want 200", r.status, r.body)
	}
	select {
	case wasFinished := <-acked:
		if !wasFinished {
			t.Fatal("the fence was acknowledged while a produce under the fenced capability was still in flight")
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no ack of seq %d", fenceSeq.Load())
	}
	expectError(t, h.do(http.MethodPost, recordsURL(0), prod, strings.NewReader(`{"records":[{"value":"eA=="}]}`), "Content-Type", "application/json"),
		http.StatusConflict, api.CodeCapabilityRevoked)
}
