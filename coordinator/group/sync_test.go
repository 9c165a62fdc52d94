package group_test

import (
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/group"
)

func TestSyncPolls(t *testing.T) {
	w := newWorld(t)
	ref := w.nextRef()
	w.step(group.SyncPoll{Ref: ref, Gateway: "gw1"})
	if r := mustReply[group.SyncReply](t, w, ref); !r.Reset || r.Seq != 1 || !r.KeysChanged {
		t.Fatalf("first poll: %+v", r)
	}
	held := w.nextRef()
	w.step(group.SyncPoll{Ref: held, Gateway: "gw1", After: 1, Wait: time.Second})
	if _, ok := w.replies[held]; ok {
		t.Fatal("poll with nothing new answered at once")
	}
	w.advance(time.Second)
	if r := mustReply[group.SyncReply](t, w, held); r.Reset || r.Seq != 1 || len(r.Fences) != 0 {
		t.Fatalf("poll at its wait: %+v", r)
	}
	// A second poll answers the first; keys changing wakes the second.
	first, second := w.nextRef(), w.nextRef()
	w.step(group.SyncPoll{Ref: first, Gateway: "gw1", After: 1})
	w.step(group.SyncPoll{Ref: second, Gateway: "gw1", After: 1})
	mustReply[group.SyncReply](t, w, first)
	w.step(group.KeysChanged{})
	if r := mustReply[group.SyncReply](t, w, second); !r.KeysChanged || r.Reset || r.Seq != 2 {
		t.Fatalf("after keys changed: %+v", r)
	}
	// A seq this coordinator never handed out gets a reset.
	ref = w.nextRef()
	w.step(group.SyncPoll{Ref: ref, Gateway: "gw1", After: 99})
	if r := mustReply[group.SyncReply](t, w, ref); !r.Reset || r.Seq != 2 {
		t.Fatalf("poll after a future seq: %+v", r)
	}
	if gws := w.m.Gateways(); len(gws) != 1 || gws[0].Acked != 1 {
		t.Fatalf("gateways %+v: a reset must not count as an ack", gws)
	}
	ref = w.nextRef()
	w.step(group.SyncPoll{Ref: ref})
	mustReject(t, w, ref, api.CodeBadRequest)
}

// A gateway behind the compacted log gets a reset snapshot with one fence
// per partition.
func TestSyncLogCompaction(t *testing.T) {
	w := newWorld(t, func(c *group.Config) { c.SyncLogMax = 4 })
	w.topics(map[string]int32{"t": 6})
	w.pollUntilParked("gw1")
	w.pollUntilParked("lagging")
	w.stuck["lagging"] = true
	behind := w.gateways["lagging"].seq
	a := w.join("g", "a", "t")
	w.heartbeat(a)
	b := w.join("g", "b", "t") // 3 fences
	w.settle("g")
	w.heartbeat(b)
	w.step(group.RevokePartition{Ref: w.nextRef(), Group: "g", Topic: "t", Partition: 0})
	w.step(group.RevokePartition{Ref: w.nextRef(), Group: "g", Topic: "t", Partition: 1})
	w.settle("g")
	if w.m.SyncSeq() < behind+5 {
		t.Fatalf("seq %d, want at least 5 entries after %d", w.m.SyncSeq(), behind)
	}
	ref := w.nextRef()
	w.step(group.SyncPoll{Ref: ref, Gateway: "lagging", After: behind})
	r := mustReply[group.SyncReply](t, w, ref)
	if !r.Reset || len(r.Fences) != 6 {
		t.Fatalf("lagging gateway got %+v, want a reset with 6 fences", r)
	}
	for _, f := range r.Fences {
		if p := w.partition("g", f.Topic, f.Partition); p.Epoch != f.Epoch {
			t.Fatalf("fence %+v, partition at %d", f, p.Epoch)
		}
	}
}

// restart rebuilds the machine from the store, as after a crash: held
// requests are lost.
func (w *world) restart(after time.Duration) {
	w.t.Helper()
	w.now = w.now.Add(after)
	m, err := group.Restore(w.cfg, rand.New(rand.NewPCG(3, 4)), w.store.snapshot(), w.now)
	if err != nil {
		w.t.Fatal(err)
	}
	w.m = m
	for _, c := range w.clients {
		c.parked = 0
	}
	for _, gw := range w.gateways {
		gw.parked = 0
	}
	w.drain()
}

// A restart in the middle of a handoff: epochs and offsets survive, the
// handoff resumes once members and gateways return, and gateways with a
// seq from before the restart resynchronise from a reset.
func TestRestartMidHandoff(t *testing.T) {
	w, ids := threeMembers(t)
	w.settleGateways()
	d := w.join("g", "d", "t")
	w.heartbeat(d)
	w.pollUntilParked("gw1")
	w.release(ids[0], 555) // a released; gw2 never acked; b and c not released
	before := w.describe("g")
	seqBefore := w.m.SyncSeq()
	oldSeq := w.gateways["gw2"].seq

	w.restart(time.Second)
	after := w.describe("g")
	if len(after.Members) != 4 {
		t.Fatalf("members after restart: %+v", after.Members)
	}
	for i, p := range after.Partitions {
		b := before.Partitions[i]
		if p.Epoch != b.Epoch || p.Committed != b.Committed || p.State != b.State || p.Owner != b.Owner || p.Target != b.Target {
			t.Fatalf("partition changed across restart:\n before %+v\n after  %+v", b, p)
		}
	}
	if w.m.SyncSeq() <= seqBefore || w.store.seq != w.m.SyncSeq() {
		t.Fatalf("sync seq %d after restart (persisted %d), was %d", w.m.SyncSeq(), w.store.seq, seqBefore)
	}
	ref := w.nextRef()
	w.step(group.SyncPoll{Ref: ref, Gateway: "gw2", After: oldSeq})
	if r := mustReply[group.SyncReply](t, w, ref); !r.Reset || len(r.Fences) != 12 {
		t.Fatalf("old seq after restart: %+v", r)
	}
	w.gateways["gw2"].seq = w.replies[ref].(group.SyncReply).Seq
	if w.revoking("g") != true {
		t.Fatal("handoff lost in the restart")
	}
	// Members come back; b and c are told again to release.
	w.settle("g")
	if w.ownedBy("g", d) != 3 {
		t.Fatalf("after the restart the newcomer owns %d, want 3", w.ownedBy("g", d))
	}
	offsets := map[int64]int{}
	for _, g := range grantsFor(w.sent, d) {
		offsets[g.Offset]++
	}
	if offsets[555] != 1 {
		t.Fatalf("grant offsets %v: a's released offset 555 lost", offsets)
	}
	// A member that does not come back expires after a full session.
	w.restart(time.Second)
	w.keepAliveUntil(w.now.Add(w.cfg.SessionTimeout+w.cfg.HeartbeatWait), ids[1], ids[2], d)
	if w.isMember("g", ids[0]) || !w.isMember("g", d) {
		t.Fatalf("members after the second restart: %+v", w.describe("g").Members)
	}
	for _, b := range before.Partitions {
		if e := w.partition("g", b.Topic, b.Partition).Epoch; e < b.Epoch {
			t.Fatalf("%s/%d epoch fell from %d to %d", b.Topic, b.Partition, b.Epoch, e)
		}
	}
}

// Gateways whose polls are held from one seq get one delta: the same
// fences, in one list the machine built once (a member's bulk revoke with
// 16 gateways built 16 copies of 10,000 fences in the loop, BENCHMARKS
// §3), equal to the delta a poll from that seq gets on its own.
func TestParkedPollsShareOneDelta(t *testing.T) {
	w := newWorld(t)
	w.topics(map[string]int32{"t": 6})
	a := w.join("g", "a", "t")
	w.heartbeat(a)
	w.settle("g")
	ids := []string{"gw1", "gw2", "gw3"}
	held := map[string]group.Ref{}
	for _, id := range ids {
		w.pollUntilParked(id)
		held[id] = w.gateways[id].parked
	}
	after := w.gateways["gw1"].seq
	w.step(group.RevokeMember{Ref: w.nextRef(), Group: "g", MemberID: a})
	ref := w.nextRef()
	w.step(group.SyncPoll{Ref: ref, Gateway: "late", After: after})
	alone := mustReply[group.SyncReply](t, w, ref)
	if len(alone.Fences) != 6 || len(alone.RevokedMembers) != 1 {
		t.Fatalf("delta after the revoke: %+v, want 6 fences and the revoked member", alone)
	}
	var first group.SyncReply
	for i, id := range ids {
		r := mustReply[group.SyncReply](t, w, held[id])
		if r.Gateway != id {
			t.Fatalf("reply to %s names gateway %s", id, r.Gateway)
		}
		r.Ref, r.Gateway = alone.Ref, alone.Gateway
		if !reflect.DeepEqual(r, alone) {
			t.Fatalf("held poll of %s got %+v, a poll from seq %d alone %+v", id, r, after, alone)
		}
		if i == 0 {
			first = r
		} else if &r.Fences[0] != &first.Fences[0] {
			t.Fatalf("%s's reply has a list of fences of its own: built once per gateway", id)
		}
	}
}
