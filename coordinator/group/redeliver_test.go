package group_test

import (
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/assign"
	"github.com/capgate/capgate/coordinator/group"
)

// lostGrant builds the failure RedeliverNews undoes: member a owned both
// partitions of t, b joined, a released the one that moves, and the news
// carrying b's grant never reached b (the shell answered 500). It
// returns the world, a, b and that news; b owns the partition without a
// capability for it, and (the drop answered its heartbeat) holds a
// heartbeat again.
func lostGrant(t *testing.T) (*world, string, string, group.News) {
	t.Helper()
	w := newWorld(t)
	w.topics(map[string]int32{"t": 2})
	w.pollUntilParked("gw")
	a := w.join("g", "a", "t")
	w.settle("g")
	b := w.join("g", "b", "t")
	lost := w.loseNews(b, func(n group.News) bool { return len(n.Grants) > 0 })
	w.settle("g")
	w.drop = nil
	w.heartbeat(b)
	if len(*lost) != 1 || len((*lost)[0].Grants) != 1 {
		t.Fatalf("news with b's grant lost: %+v, want one grant", *lost)
	}
	g := (*lost)[0].Grants[0]
	if owner := w.owners("g")[assign.Partition{Topic: g.Topic, Partition: g.Partition}]; owner != b {
		t.Fatalf("%s/%d owned by %q after the lost grant, want b %s", g.Topic, g.Partition, owner, b)
	}
	if _, ok := w.clients[b].held[assign.Partition{Topic: g.Topic, Partition: g.Partition}]; ok {
		t.Fatalf("b holds %s/%d although its grant was lost", g.Topic, g.Partition)
	}
	if w.clients[b].parked == 0 {
		t.Fatalf("b holds no heartbeat after the lost answer")
	}
	return w, a, b, (*lost)[0]
}

// loseNews makes the network drop every News to member that lose picks,
// and returns where they are kept.
func (w *world) loseNews(member string, lose func(group.News) bool) *[]group.News {
	var lost []group.News
	w.drop = func(msg group.Message) bool {
		n, ok := msg.(group.News)
		if ok && n.MemberID == member && lose(n) {
			lost = append(lost, n)
			return true
		}
		return false
	}
	return &lost
}

func (w *world) redeliver(n group.News) group.Message {
	w.t.Helper()
	ref := w.nextRef()
	w.step(group.RedeliverNews{Ref: ref, News: n})
	return w.replies[ref]
}

// TestRedeliverLostGrant: the news of a grant the member never got goes
// back; the member's held heartbeat is answered with it at once — the
// epoch it owns, nothing moved, no epoch raised. Without RedeliverNews
// the heartbeat stays held and b gets the partition only as a renewal
// once less than half the lease is left.
func TestRedeliverLostGrant(t *testing.T) {
	w, _, b, lost := lostGrant(t)
	g := lost.Grants[0]
	id := assign.Partition{Topic: g.Topic, Partition: g.Partition}
	epochs, owners := w.epochs("g"), w.owners("g")
	if _, ok := w.redeliver(lost).(group.Done); !ok {
		t.Fatalf("redeliver: %#v, want Done", w.replies[w.ref])
	}
	got, ok := w.clients[b].held[id]
	if !ok || got.Epoch != g.Epoch || got.Holder != b {
		t.Fatalf("after the redelivery b holds %+v (%t), want its grant at epoch %d at once", got, ok, g.Epoch)
	}
	news := w.clients[b].news[len(w.clients[b].news)-1]
	if len(news.Grants) != 1 || news.Grants[0].Epoch != g.Epoch || len(news.Renew) != 0 {
		t.Fatalf("b's heartbeat answered %+v, want the one grant again", news)
	}
	if e, o := w.epochs("g"), w.owners("g"); e[id] != epochs[id] || o[id] != owners[id] {
		t.Fatalf("redelivery changed %v: epoch %d→%d, owner %s→%s", id, epochs[id], e[id], owners[id], o[id])
	}
	w.heartbeat(b)
	if w.clients[b].parked == 0 {
		t.Fatalf("b's heartbeat after the redelivery answered %+v, want it held: nothing new", w.clients[b].news[len(w.clients[b].news)-1])
	}
}

// TestRedeliverLeavesOutWhatMovedOn: a lost grant whose partition was
// revoked meanwhile is not sent again (the revoke is); a member that
// left is unknown_member.
func TestRedeliverLeavesOutWhatMovedOn(t *testing.T) {
	w, _, b, lost := lostGrant(t)
	g := lost.Grants[0]
	id := assign.Partition{Topic: g.Topic, Partition: g.Partition}
	ref := w.nextRef()
	w.step(group.RevokePartition{Ref: ref, Group: "g", Topic: g.Topic, Partition: g.Partition, Reason: "test"})
	if _, ok := w.redeliver(lost).(group.Done); !ok {
		t.Fatalf("redeliver: %#v, want Done", w.replies[w.ref])
	}
	w.heartbeat(b)
	for _, n := range w.clients[b].news {
		for _, got := range append(n.Grants, n.Renew...) {
			if got.Topic == g.Topic && got.Partition == g.Partition && got.Epoch == g.Epoch {
				t.Fatalf("b got %v at epoch %d after it was revoked: %+v", id, g.Epoch, n)
			}
		}
	}
	if w.partition("g", g.Topic, g.Partition).Epoch <= g.Epoch {
		t.Fatalf("%v not fenced above %d by the revoke", id, g.Epoch)
	}

	leave := w.nextRef()
	w.step(group.Leave{Ref: leave, Group: "g", MemberID: b})
	mustReply[group.LeaveReply](t, w, leave)
	if rej, ok := w.redeliver(lost).(group.Rejected); !ok || rej.Code != api.CodeUnknownMember {
		t.Fatalf("redeliver for a member that left: %#v, want unknown_member", w.replies[w.ref])
	}
}

// TestRedeliverLostRevokeAndRenewal: a revoke the member never got is
// told again until it releases; a renewal it never got comes again,
// still a renewal (same epoch, the expiry now due).
func TestRedeliverLostRevokeAndRenewal(t *testing.T) {
	w := newWorld(t)
	w.topics(map[string]int32{"t": 2})
	w.pollUntilParked("gw")
	a := w.join("g", "a", "t")
	w.settle("g")
	w.heartbeat(a)
	lost := w.loseNews(a, func(n group.News) bool { return len(n.Revoke) > 0 })
	b := w.join("g", "b", "t")
	if len(*lost) != 1 || len((*lost)[0].Revoke) != 1 {
		t.Fatalf("a's lost news %+v, want one revoke", *lost)
	}
	w.drop = nil
	revoke := (*lost)[0]
	w.redeliver(revoke)
	w.heartbeat(a)
	if got := w.clients[a].revoked; len(got) != 1 || got[0] != revoke.Revoke[0] {
		t.Fatalf("a was told to revoke %v after the redelivery, want %v", got, revoke.Revoke)
	}
	w.release(a, 7)
	w.redeliver(revoke)
	w.heartbeat(a)
	if n := w.clients[a].news[len(w.clients[a].news)-1]; w.clients[a].parked == 0 && len(n.Revoke) > 0 {
		t.Fatalf("a was told again to revoke what it released: %+v", n)
	}
	w.settle("g")

	// A renewal: half the lease gone, a's heartbeat renews; that answer
	// is lost, and comes again.
	lost = w.loseNews(a, func(n group.News) bool { return len(n.Renew) > 0 })
	w.keepAliveUntil(w.now.Add(w.cfg.CapabilityLease/2+w.cfg.HeartbeatWait+time.Second), a, b)
	w.heartbeat(a)
	if len(*lost) == 0 || len((*lost)[0].Renew) != 1 {
		t.Fatalf("a's lost renewal: %+v, want one", *lost)
	}
	w.drop = nil
	renewal := (*lost)[0]
	before := len(w.clients[a].news)
	w.redeliver(renewal)
	w.heartbeat(a)
	if len(w.clients[a].news) == before {
		t.Fatalf("a's heartbeat after the redelivered renewal is still held")
	}
	n := w.clients[a].news[before]
	if len(n.Renew) != 1 || n.Renew[0].Epoch != renewal.Renew[0].Epoch || len(n.Grants) != 0 {
		t.Fatalf("a's heartbeat after the redelivery: %+v, want the renewal of epoch %d", n, renewal.Renew[0].Epoch)
	}
}
