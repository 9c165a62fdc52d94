package group_test

import (
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/assign"
	"github.com/capgate/capgate/coordinator/group"
)

// A member restarting with the same instance id takes its partitions back
// under fresh epochs (fence, ack, grant); nobody else is disturbed.
func TestStaticMembershipRejoin(t *testing.T) {
	w, ids := threeMembers(t)
	w.settleGateways()
	old := ids[0]
	epochsBefore, ownersBefore := w.epochs("g"), w.owners("g")
	from := len(w.sent)

	renewed := w.join("g", "a", "t")
	if renewed == old || w.isMember("g", old) {
		t.Fatalf("rejoin kept the old member id %s", old)
	}
	if g := w.replies[w.ref].(group.JoinReply).Grants; len(g) != 0 {
		t.Fatalf("grants before the gateways acked the fences: %v", g)
	}
	w.heartbeat(renewed)
	fences := fencesIn(w.sent[from:])
	if len(fences) != 8 {
		t.Fatalf("fences %v, want the old member's 4 on each gateway", fences)
	}
	for _, f := range fences {
		p := assign.Partition{Topic: f.Topic, Partition: f.Partition}
		if ownersBefore[p] != old || f.Epoch != epochsBefore[p]+1 {
			t.Fatalf("fence %+v: owner was %s at %d", f, ownersBefore[p], epochsBefore[p])
		}
	}
	w.settleGateways() // no release from the old incarnation is needed
	granted := grantsFor(w.sent[from:], renewed)
	if len(granted) != 4 {
		t.Fatalf("renewed member got %v, want its 4 partitions", granted)
	}
	for _, g := range granted {
		p := assign.Partition{Topic: g.Topic, Partition: g.Partition}
		if ownersBefore[p] != old || g.Epoch != epochsBefore[p]+1 || g.Offset != 100+int64(g.Partition) {
			t.Fatalf("grant %+v: was %s@%d", g, ownersBefore[p], epochsBefore[p])
		}
	}
	for _, id := range ids[1:] {
		if r := revokesFor(w.sent[from:], id); len(r) != 0 {
			t.Fatalf("member %s disturbed: %v", id, r)
		}
	}
	for p, owner := range ownersBefore {
		if owner != old && w.epochs("g")[p] != epochsBefore[p] {
			t.Fatalf("%v epoch changed", p)
		}
	}
	// The old incarnation's capabilities are fenced: its commits are stale.
	if r := w.commit(renewed, "t", granted[0].Partition, epochsBefore[assign.Partition{Topic: "t", Partition: granted[0].Partition}], 999, false); r.(group.Rejected).Code != api.CodeStaleEpoch {
		t.Fatalf("old epoch commit: %#v", r)
	}
}

func TestAssignorMismatch(t *testing.T) {
	w := newWorld(t)
	w.topics(map[string]int32{"t": 2})
	ref := w.nextRef()
	w.step(group.Join{Ref: ref, Group: "g", InstanceID: "a", Topics: []string{"t"}, Assignor: "range"})
	if r := mustReply[group.JoinReply](t, w, ref); w.describe("g").Config.Assignor != "range" {
		t.Fatalf("empty group did not adopt the join's assignor: %+v", r)
	}
	ref = w.nextRef()
	w.step(group.Join{Ref: ref, Group: "g", InstanceID: "b", Topics: []string{"t"}, Assignor: "sticky"})
	mustReject(t, w, ref, api.CodeInconsistentAssign)
	ref = w.nextRef()
	w.step(group.Join{Ref: ref, Group: "g", InstanceID: "b", Topics: []string{"t"}})
	mustReply[group.JoinReply](t, w, ref)
	if len(w.describe("g").Members) != 2 {
		t.Fatal("join without an assignor refused")
	}
}

func TestJoinValidation(t *testing.T) {
	w := newWorld(t)
	for name, j := range map[string]group.Join{
		"no group":        {Topics: []string{"t"}},
		"no topics":       {Group: "g"},
		"both":            {Group: "g", Topics: []string{"t"}, TopicPattern: "t.*"},
		"bad pattern":     {Group: "g", TopicPattern: "("},
		"short session":   {Group: "g", Topics: []string{"t"}, SessionTimeout: time.Millisecond},
		"long session":    {Group: "g", Topics: []string{"t"}, SessionTimeout: time.Hour},
		"unknown assignr": {Group: "g", Topics: []string{"t"}, Assignor: "random"},
		"empty topic":     {Group: "g", Topics: []string{""}},
	} {
		j.Ref = w.nextRef()
		w.step(j)
		mustReject(t, w, j.Ref, api.CodeBadRequest)
		_ = name
	}
	ref := w.nextRef()
	w.step(group.Join{Ref: ref, Group: "g", MemberID: "ghost", Topics: []string{"t"}})
	mustReject(t, w, ref, api.CodeUnknownMember)
}

// Heartbeats are long polls: held until news or heartbeat_wait, a second
// one answers the first, and every request gets exactly one reply.
func TestHeartbeatLongPoll(t *testing.T) {
	w := newWorld(t)
	w.topics(map[string]int32{"t": 2})
	a := w.join("g", "a", "t")
	first := w.nextRef()
	if msgs := w.step(group.Heartbeat{Ref: first, Group: "g", MemberID: a}); len(msgs) != 0 {
		t.Fatalf("heartbeat without news answered at once: %v", msgs)
	}
	second := w.nextRef()
	w.step(group.Heartbeat{Ref: second, Group: "g", MemberID: a, Wait: time.Second})
	if n := mustReply[group.News](t, w, first); len(n.Revoke)+len(n.Grants)+len(n.Renew) != 0 {
		t.Fatalf("superseded heartbeat: %+v", n)
	}
	w.advance(time.Second - time.Millisecond)
	if _, ok := w.replies[second]; ok {
		t.Fatal("answered before its wait")
	}
	w.advance(time.Millisecond)
	mustReply[group.News](t, w, second)

	// News arriving while held answers at once.
	third := w.nextRef()
	w.step(group.Heartbeat{Ref: third, Group: "g", MemberID: a})
	w.join("g", "b", "t")
	if n := mustReply[group.News](t, w, third); len(n.Revoke) != 1 {
		t.Fatalf("held heartbeat: %+v, want one revoke", n)
	}
	ref := w.nextRef()
	w.step(group.Heartbeat{Ref: ref, Group: "g", MemberID: "ghost"})
	mustReject(t, w, ref, api.CodeUnknownMember)
}

// Renewals: same epoch, later expiry, only once less than half the lease
// is left, never while revoking.
func TestRenewals(t *testing.T) {
	w := newWorld(t, longSessions)
	w.topics(map[string]int32{"t": 2})
	a := w.join("g", "a", "t")
	first := w.clients[a].held[assign.Partition{Topic: "t", Partition: 0}]
	w.advance(w.cfg.CapabilityLease/2 - time.Second)
	w.heartbeat(a)
	w.advance(w.cfg.HeartbeatWait)
	if n := w.clients[a].news[0]; len(n.Renew) != 0 {
		t.Fatalf("renewed with more than half the lease left: %+v", n)
	}
	w.advance(time.Second)
	w.heartbeat(a)
	n := w.clients[a].news[1]
	if len(n.Renew) != 2 {
		t.Fatalf("news %+v, want 2 renewals", n)
	}
	for _, r := range n.Renew {
		if r.Epoch != first.Epoch || !r.ExpiresAt.After(first.ExpiresAt) || r.ExpiresAt.After(w.now.Add(w.cfg.CapabilityLease)) {
			t.Fatalf("renewal %+v of %+v", r, first)
		}
	}
	// While t/1 is revoked from a (b joined, a keeps its capability), a's
	// heartbeats renew t/0 only.
	w.join("g", "b", "t")
	w.advance(w.cfg.CapabilityLease/2 + time.Second)
	w.heartbeat(a)
	last := w.clients[a].news[len(w.clients[a].news)-1]
	if len(last.Renew) != 1 || last.Renew[0].Partition != 0 {
		t.Fatalf("renewals while revoking: %+v", last)
	}
}

// Leaving releases everything at once; final offsets are committed.
func TestLeave(t *testing.T) {
	w := newWorld(t)
	w.topics(map[string]int32{"t": 2})
	a := w.join("g", "a", "t")
	b := w.join("g", "b", "t")
	w.heartbeat(b)
	p := w.revokingPartition("g")
	ref := w.nextRef()
	w.step(group.Leave{Ref: ref, Group: "g", MemberID: a, Offsets: []group.CommitOffset{
		{Topic: p.Topic, Partition: p.Partition, Epoch: p.OwnerEpoch, Offset: 42},
	}})
	mustReply[group.LeaveReply](t, w, ref)
	if w.ownedBy("g", b) != 2 || w.partition("g", p.Topic, p.Partition).Committed != 42 {
		t.Fatalf("after leave: %+v", w.describe("g").Partitions)
	}
	g := grantsFor(w.sent, b)
	if len(g) != 2 {
		t.Fatalf("grants after leave: %+v", g)
	}
	ref = w.nextRef()
	w.step(group.Leave{Ref: ref, Group: "g", MemberID: a})
	mustReject(t, w, ref, api.CodeUnknownMember)
}
