package gateway

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
)

// TestFenceCancelsInFlightFetchBeforeAck: a fence pushed while a long poll
// is in flight cancels it with 409, and the gateway acknowledges the
// fence's seq only after the fetch has finished.
func TestFenceCancelsInFlightFetchBeforeAck(t *testing.T) {
	h := newHarness(t, nil)
	tok, _ := h.mint(capClaims(0))
	done := make(chan response, 1)
	go func() { done <- h.get(tok, recordsPath(0, "offset=0&max_wait_ms=12000")) }()
	waitFor(t, "the fetch in flight", func() bool { return h.gw.inflight.count() == 1 })

	type ackState struct{ inflight, cancelled int64 }
	acked := make(chan ackState, 1)
	var fenceSeq atomic.Uint64
	h.sync.setOnPoll(func(after uint64) {
		if s := fenceSeq.Load(); s != 0 && after == s {
			select {
			case acked <- ackState{int64(h.gw.inflight.count()), h.gw.inflight.cancelled.Load()}:
			default:
			}
		}
	})
	start := time.Now()
	fenceSeq.Store(h.sync.currentSeq() + 1)
	if seq := h.sync.push(api.SyncResponse{Fences: []api.Fence{{Group: "g", Topic: testTopic, Partition: 0, Epoch: 2}}}); seq != fenceSeq.Load() {
		t.Fatalf("pushed seq %d, expected %d", seq, fenceSeq.Load())
	}

	r := <-done
	expectError(t, r, http.StatusConflict, api.CodeCapabilityRevoked)
	if elapsed := time.Since(start); elapsed > 8*time.Second {
		t.Fatalf("fetch answered only after %v", elapsed)
	}
	var st ackState
	select {
	case st = <-acked:
	case <-time.After(10 * time.Second):
		t.Fatalf("no ack of seq %d; polls %v", fenceSeq.Load(), h.sync.pollLog())
	}
	if st.inflight != 0 || st.cancelled != 1 {
		t.Fatalf("at the ack: %d fetches still in flight, %d cancelled; want 0 and 1", st.inflight, st.cancelled)
	}
	expectError(t, h.get(tok, recordsPath(0, "offset=0")), http.StatusConflict, api.CodeCapabilityRevoked)
}

// TestFenceAfterBrokerAnsweredStillRefuses: the fence lands between the
// broker's answer and the response; the re-check refuses the records.
func TestFenceAfterBrokerAnsweredStillRefuses(t *testing.T) {
	h := newHarness(t, nil)
	h.produce(0, 2)
	tok, _ := h.mint(capClaims(0))
	answered, release := make(chan struct{}), make(chan struct{})
	h.gw.afterFetch = func() {
		close(answered)
		<-release
	}
	done := make(chan response, 1)
	go func() { done <- h.get(tok, recordsPath(0, "offset=0")) }()
	<-answered
	seq := h.sync.push(api.SyncResponse{Fences: []api.Fence{{Group: "g", Topic: testTopic, Partition: 0, Epoch: 2}}})
	waitFor(t, "the fence applied", func() bool { return h.gw.view.Fence("g", testTopic, 0) == 2 })
	close(release)
	expectError(t, <-done, http.StatusConflict, api.CodeCapabilityRevoked)
	h.sync.waitAck(t, seq)
}

// TestNewerCapabilityRaisesFence: a valid capability at a higher epoch
// proves older ones dead: the gateway raises its fence at once, without
// the sync channel, and cancels the older epoch's long poll.
func TestNewerCapabilityRaisesFence(t *testing.T) {
	h := newHarness(t, nil)
	old, _ := h.mint(capClaims(0))
	done := make(chan response, 1)
	go func() { done <- h.get(old, recordsPath(0, "offset=0&max_wait_ms=12000")) }()
	waitFor(t, "the fetch in flight", func() bool { return h.gw.inflight.count() == 1 })

	c := capClaims(0)
	c.Epoch, c.Subject = 2, "member-2"
	newer, _ := h.mint(c)
	if r := h.get(newer, recordsPath(0, "offset=0")); r.status != 200 {
		t.Fatalf("newer capability: %d %s", r.status, r.body)
	}
	expectError(t, <-done, http.StatusConflict, api.CodeCapabilityRevoked)
	expectError(t, h.get(old, recordsPath(0, "offset=0")), http.StatusConflict, api.CodeCapabilityRevoked)
}

// TestDenyCancelsInFlightFetch: a denied jti (not a fence) also cancels
// the long poll before the ack.
func TestDenyCancelsInFlightFetch(t *testing.T) {
	h := newHarness(t, nil)
	c := capClaims(0)
	c.Group, c.Epoch = "", 0 // a shared grant, fenced by jti only
	tok, claims := h.mint(c)
	done := make(chan response, 1)
	go func() { done <- h.get(tok, recordsPath(0, "offset=0&max_wait_ms=12000")) }()
	waitFor(t, "the fetch in flight", func() bool { return h.gw.inflight.count() == 1 })
	seq := h.sync.push(api.SyncResponse{Denied: []api.Denied{{JTI: claims.ID, Exp: int64(claims.ExpiresAt)}}})
	expectError(t, <-done, http.StatusConflict, api.CodeCapabilityRevoked)
	h.sync.waitAck(t, seq)
	if n := h.gw.inflight.cancelled.Load(); n != 1 {
		t.Fatalf("cancelled %d", n)
	}
}
