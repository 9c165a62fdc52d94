package group_test

import (
	"testing"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/group"
)

// TestReleaseOfOwnedPartition: a holder that releases a partition it still
// owns (it stopped on a 409 that was not a fence, e.g. a denied jti) gets
// it fenced and granted again — to itself, the assignor's choice — under a
// fresh epoch, once the gateways are safe, without waiting for another
// release. Its other partitions are not touched.
func TestReleaseOfOwnedPartition(t *testing.T) {
	w := newWorld(t)
	w.topics(map[string]int32{"t": 2})
	w.poll("gw1")
	a := w.join("g", "a", "t")
	e0 := w.partition("g", "t", 0).Epoch
	e1 := w.partition("g", "t", 1).Epoch
	if _, ok := w.commit(a, "t", 0, e0, 7, true).(group.CommitReply); !ok {
		t.Fatal("release of an owned partition refused")
	}
	p := w.partition("g", "t", 0)
	if p.State != group.Revoking || p.Epoch != e0+1 || !p.Released || p.Committed != 7 {
		t.Fatalf("after the release: %+v", p)
	}
	w.pollUntilParked("gw1") // the gateway acks the fence
	w.heartbeat(a)
	p = w.partition("g", "t", 0)
	if p.State != group.Owned || p.Owner != a || p.Epoch != e0+1 {
		t.Fatalf("not granted again under a fresh epoch: %+v", p)
	}
	if got := w.partition("g", "t", 1); got.State != group.Owned || got.Epoch != e1 {
		t.Fatalf("the other partition was touched: %+v", got)
	}
	// The old epoch can no longer commit.
	if r, ok := w.commit(a, "t", 0, e0, 8, false).(group.Rejected); !ok || r.Code != api.CodeStaleEpoch {
		t.Fatalf("commit at the given-up epoch: %#v", w.replies[w.ref])
	}
}
