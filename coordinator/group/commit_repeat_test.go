package group_test

import (
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/assign"
	"github.com/capgate/capgate/coordinator/group"
)

// A release whose first attempt landed (its answer lost with a frozen
// replica) is sent again after the partition moved on: the repeat —
// same member, epoch, offset and metadata — is answered done, writing
// nothing, where it was stale_epoch before (the SDK reported a release
// that had landed as refused). Across a restart too: the epoch of the
// capability that committed an offset is kept with it. Only an exact
// repeat is: another offset at that epoch stays stale. And a release
// repeated after the partition came back to the member under a newer
// epoch releases nothing of the new one.
func TestRepeatedReleaseAfterTheMoveIsDone(t *testing.T) {
	w := newWorld(t)
	w.topics(map[string]int32{"t": 2})
	w.pollUntilParked("gw1")
	a := w.join("g", "a", "t")
	w.heartbeat(a)
	b := w.join("g", "b", "t")
	w.heartbeat(a) // the revoke of the partition moving to b
	revoked := w.clients[a].revoked
	if len(revoked) != 1 {
		t.Fatalf("a was told to revoke %v, want one partition", revoked)
	}
	r := revoked[0]
	release := func(offset int64) group.Message {
		t.Helper()
		return w.commit(a, r.Topic, r.Partition, r.Epoch, offset, true)
	}
	if _, ok := release(7).(group.CommitReply); !ok {
		t.Fatalf("release: %#v", w.replies[w.ref])
	}
	w.clients[a].revoked = nil
	w.settle("g")
	moved := w.partition("g", r.Topic, r.Partition)
	if moved.Owner != b || moved.Epoch <= r.Epoch {
		t.Fatalf("after the release %s/%d is %+v, want b's under a newer epoch", r.Topic, r.Partition, moved)
	}

	repeat := func(when string) {
		t.Helper()
		writes := w.store.writes
		reply, ok := release(7).(group.CommitReply)
		if !ok {
			t.Fatalf("%s: the repeated release: %#v, want it answered done", when, w.replies[w.ref])
		}
		if len(reply.Committed) != 1 || reply.Committed[0].Offset != 7 {
			t.Fatalf("%s: the repeat answered %+v, want offset 7 committed", when, reply.Committed)
		}
		if w.store.writes != writes {
			t.Fatalf("%s: the repeat wrote %d records", when, w.store.writes-writes)
		}
		if p := w.partition("g", r.Topic, r.Partition); p.Owner != moved.Owner || p.Epoch != moved.Epoch || p.State != group.Owned {
			t.Fatalf("%s: the repeat moved %s/%d: %+v, was %+v", when, r.Topic, r.Partition, p, moved)
		}
	}
	repeat("after the move")
	mustRejectCode(t, release(8), api.CodeStaleEpoch)
	w.restart(time.Second)
	w.heartbeat(a)
	w.heartbeat(b)
	repeat("after a restart")

	// b leaves: the partition comes back to a under a newer epoch.
	ref := w.nextRef()
	w.step(group.Leave{Ref: ref, Group: "g", MemberID: b})
	mustReply[group.LeaveReply](t, w, ref)
	w.settle("g")
	back := w.partition("g", r.Topic, r.Partition)
	if back.Owner != a || back.Epoch <= moved.Epoch {
		t.Fatalf("after b left %s/%d is %+v, want a's under a newer epoch", r.Topic, r.Partition, back)
	}
	if _, ok := release(7).(group.CommitReply); !ok {
		t.Fatalf("the old release repeated once the partition came back: %#v", w.replies[w.ref])
	}
	if p := w.partition("g", r.Topic, r.Partition); p.Owner != a || p.Epoch != back.Epoch || p.State != group.Owned {
		t.Fatalf("the old epoch's release repeated moved the new one: %+v, was %+v", p, back)
	}
	granted := w.clients[a].held[assign.Partition{Topic: r.Topic, Partition: r.Partition}]
	if _, ok := w.commit(a, r.Topic, r.Partition, granted.Epoch, 9, false).(group.CommitReply); !ok {
		t.Fatalf("a's commit under the new epoch: %#v", w.replies[w.ref])
	}
	mustRejectCode(t, release(7), api.CodeStaleEpoch) // the offset moved on: no repeat
}

func mustRejectCode(t *testing.T, msg group.Message, code api.Code) {
	t.Helper()
	if rej, ok := msg.(group.Rejected); !ok || rej.Code != code {
		t.Fatalf("%#v, want %s", msg, code)
	}
}
