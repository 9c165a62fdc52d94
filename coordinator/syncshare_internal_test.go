package coordinator

import (
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/group"
)

// TestLargeSyncAnswersAreEncodedOnce: the gateways polling from one seq
// after a large revoke get one encoding of its answer, not one each; a
// poll from elsewhere, a reset, another key ring or a small answer gets
// its own; and the kept encoding is dropped after syncShareKeep.
func TestLargeSyncAnswersAreEncodedOnce(t *testing.T) {
	reply := func(seq uint64, n int, reset bool) group.SyncReply {
		r := group.SyncReply{Seq: seq, Reset: reset}
		for p := range n {
			r.Fences = append(r.Fences, api.Fence{Group: "g", Topic: "t", Partition: int32(p), Epoch: seq})
		}
		return r
	}
	ring, other := &api.JWKS{Keys: []api.JWK{{Kid: "a"}}}, &api.JWKS{Keys: []api.JWK{{Kid: "b"}}}
	var s syncShare
	enc := func(after uint64, r group.SyncReply, ring *api.JWKS) []byte {
		resp := api.SyncResponse{Seq: r.Seq, Reset: r.Reset, Fences: r.Fences}
		if r.Reset {
			resp.Keys = ring.Keys
		}
		b, err := s.encode(after, r, resp, ring)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	same := func(a, b []byte) bool { return &a[0] == &b[0] }
	big := reply(9, syncShareMin, false)
	first := enc(5, big, ring)
	if !same(first, enc(5, big, ring)) {
		t.Fatal("a second poll from the same seq had the answer encoded again")
	}
	if same(first, enc(4, reply(9, syncShareMin, false), ring)) {
		t.Fatal("a poll from another seq got another poll's delta")
	}
	reset := reply(9, syncShareMin, true)
	r1 := enc(1, reset, ring)
	if !same(r1, enc(7, reset, ring)) {
		t.Fatal("a reset at one seq was encoded twice")
	}
	if same(r1, enc(7, reset, other)) {
		t.Fatal("a reset carrying another key ring got the first ring's")
	}
	small := reply(10, syncShareMin-1, false)
	if same(enc(9, small, ring), enc(9, small, ring)) {
		t.Fatal("a small answer was kept")
	}
	enc(9, big, ring)
	deadline := time.Now().Add(10 * syncShareKeep)
	for {
		s.mu.Lock()
		kept := s.body != nil
		s.mu.Unlock()
		if !kept {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the encoding is still held %v after", 10*syncShareKeep)
		}
		time.Sleep(10 * time.Millisecond) // polling a deadline: the drop is a timer's
	}
}
