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
		repeatedDone(t, w, when, func() group.Message { return release(7) })
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

// repeatedDone sends a repeated release and checks it is answered done
// with offset 7 committed, writing nothing.
func repeatedDone(t *testing.T, w *world, when string, release func() group.Message) {
	t.Helper()
	writes := w.store.writes
	reply, ok := release().(group.CommitReply)
	if !ok {
		t.Fatalf("%s: the repeated release: %#v, want it answered done", when, w.replies[w.ref])
	}
	if len(reply.Committed) != 1 || reply.Committed[0].Offset != 7 {
		t.Fatalf("%s: the repeat answered %+v, want offset 7 committed", when, reply.Committed)
	}
	if w.store.writes != writes {
		t.Fatalf("%s: the repeat wrote %d records", when, w.store.writes-writes)
	}
}

func mustRejectCode(t *testing.T, msg group.Message, code api.Code) {
	t.Helper()
	if rej, ok := msg.(group.Rejected); !ok || rej.Code != code {
		t.Fatalf("%#v, want %s", msg, code)
	}
}

// A release without an offset (the holder read nothing since its last
// commit, or released again for a renewal of an epoch it gave up)
// whose answer was lost, repeated after the partition moved on, is
// answered done — stale_epoch before, while a repeated commit with an
// offset was done — and writes nothing. The release keeps the offset
// standing under the releasing epoch (its offset record's epoch, Kept:
// no commit), so the repeat is known after a restart too. Repeated after
// the partition came back to the member under a newer epoch it releases
// nothing of that one; once the member committed under the new epoch the
// old release is stale. A release of a partition with nothing committed
// has no offset to carry the epoch: its repeat stays stale.
func TestRepeatedPureReleaseAfterTheMoveIsDone(t *testing.T) {
	w := newWorld(t)
	w.topics(map[string]int32{"t": 2})
	w.pollUntilParked("gw1")
	a := w.join("g", "a", "t")
	w.heartbeat(a)
	for id, g := range w.clients[a].held {
		if _, ok := w.commit(a, id.Topic, id.Partition, g.Epoch, 7, false).(group.CommitReply); !ok {
			t.Fatalf("commit: %#v", w.replies[w.ref])
		}
	}
	// a rejoins (a restarted process): its partitions come back under
	// fresh epochs, the offsets still committed under the old ones.
	ref := w.nextRef()
	w.step(group.Join{Ref: ref, Group: "g", MemberID: a, ClientID: "c", Topics: []string{"t"}})
	mustReply[group.JoinReply](t, w, ref)
	w.settle("g")
	w.heartbeat(a)
	b := w.join("g", "b", "t")
	w.heartbeat(a)
	revoked := w.clients[a].revoked
	if len(revoked) != 1 {
		t.Fatalf("a was told to revoke %v, want one partition", revoked)
	}
	r := revoked[0]
	if p := w.store.offsets[pkey{"g", assign.Partition{Topic: r.Topic, Partition: r.Partition}}]; p.Epoch == r.Epoch {
		t.Fatalf("the offset's epoch is the revoked one's (%d) before the release: the test needs it older", p.Epoch)
	}
	release := func() group.Message {
		t.Helper()
		return w.commit(a, r.Topic, r.Partition, r.Epoch, -1, true)
	}
	writes := w.store.writes
	if _, ok := release().(group.CommitReply); !ok {
		t.Fatalf("release: %#v", w.replies[w.ref])
	}
	if kept := w.store.offsets[pkey{"g", assign.Partition{Topic: r.Topic, Partition: r.Partition}}]; kept.Offset != 7 || kept.Epoch != r.Epoch || !kept.Kept {
		t.Fatalf("the release's offset record: %+v, want offset 7 kept under epoch %d", kept, r.Epoch)
	}
	if w.store.writes == writes {
		t.Fatal("the release wrote nothing")
	}
	w.clients[a].revoked = nil
	w.settle("g")
	moved := w.partition("g", r.Topic, r.Partition)
	if moved.Owner != b || moved.Epoch <= r.Epoch || moved.Committed != 7 {
		t.Fatalf("after the release %s/%d is %+v, want b's under a newer epoch from offset 7", r.Topic, r.Partition, moved)
	}
	repeat := func(when string) {
		t.Helper()
		repeatedDone(t, w, when, release)
	}
	repeat("after the move")
	w.restart(time.Second)
	w.heartbeat(a)
	w.heartbeat(b)
	repeat("after a restart")

	ref = w.nextRef()
	w.step(group.Leave{Ref: ref, Group: "g", MemberID: b})
	mustReply[group.LeaveReply](t, w, ref)
	w.settle("g")
	back := w.partition("g", r.Topic, r.Partition)
	if back.Owner != a || back.Epoch <= moved.Epoch {
		t.Fatalf("after b left %s/%d is %+v, want a's under a newer epoch", r.Topic, r.Partition, back)
	}
	repeat("once the partition came back")
	if p := w.partition("g", r.Topic, r.Partition); p.Owner != a || p.Epoch != back.Epoch || p.State != group.Owned {
		t.Fatalf("the old epoch's release repeated moved the new one: %+v, was %+v", p, back)
	}
	granted := w.clients[a].held[assign.Partition{Topic: r.Topic, Partition: r.Partition}]
	if _, ok := w.commit(a, r.Topic, r.Partition, granted.Epoch, 9, false).(group.CommitReply); !ok {
		t.Fatalf("a's commit under the new epoch: %#v", w.replies[w.ref])
	}
	mustRejectCode(t, release(), api.CodeStaleEpoch)
}
