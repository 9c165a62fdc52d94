package group_test

import (
	"maps"
	"testing"
	"time"

	"github.com/capgate/capgate/coordinator/group"
)

// deferredNews sets up what DeferNews is for: member a of group g owns
// both partitions of t; its heartbeat says resync, and the machine's
// answer (both renewals) is what the shell found its tenant's rate pays
// for none of. The shell holds that heartbeat again: it returns the
// world, a and the ref DeferNews answers (the member's request waits
// for it).
func deferredNews(t *testing.T, notBefore, until time.Duration) (*world, string, group.Ref, group.News) {
	t.Helper()
	return deferredNewsPaid(t, notBefore, until, 0, 1)
}

// deferredNewsPaid is deferredNews with the answer's News.Paid newsPaid
// (what a heartbeat that inherited a hold was handed) and the
// DeferNews's Paid paid.
func deferredNewsPaid(t *testing.T, notBefore, until time.Duration, newsPaid, paid int) (*world, string, group.Ref, group.News) {
	t.Helper()
	w := newWorld(t)
	w.topics(map[string]int32{"t": 2})
	w.pollUntilParked("gw")
	a := w.join("g", "a", "t")
	w.settle("g")
	lost := w.loseNews(a, func(n group.News) bool { return len(n.Renew) > 0 })
	w.clients[a].parked = 0 // its held heartbeat is answered empty by the next
	w.sendHeartbeat(a, true)
	w.drop = nil
	if len(*lost) != 1 || len((*lost)[0].Renew) != 2 {
		t.Fatalf("a's resync answered %+v, want both renewals", *lost)
	}
	ref := w.nextRef()
	w.clients[a].parked = ref
	(*lost)[0].Paid = newsPaid
	w.step(group.DeferNews{Ref: ref, News: (*lost)[0], NotBefore: w.now.Add(notBefore), Until: w.now.Add(until), Paid: paid})
	return w, a, ref, (*lost)[0]
}

// TestDeferredNewsPaidIsTheTotal: DeferNews.Paid is every token paid for
// the news — the ones its News was handed already (News.Paid: a hold it
// inherited) among them, since the shell pays for an answer what it was
// handed first (paceMints). Added to News.Paid, a member whose hold was
// inherited and deferred again was handed those tokens twice: a
// capability minted for each with no token behind it. Fails with
// deferNews adding News.Paid: answered Paid 3.
func TestDeferredNewsPaidIsTheTotal(t *testing.T) {
	w, _, ref, _ := deferredNewsPaid(t, 400*time.Millisecond, time.Second, 1, 2)
	w.advance(400 * time.Millisecond)
	if got, ok := w.replies[ref].(group.News); !ok || got.Paid != 2 {
		t.Fatalf("at its tokens the held heartbeat answered %#v, want Paid 2: the one handed before and the one reserved", w.replies[ref])
	}
}

// TestDeferredNewsWaitsForItsToken: a heartbeat whose news the tenant's
// rate paid for none of is held again until the token reserved for one
// of its capabilities is the tenant's (NotBefore), then answered with
// the news and the token (Paid) — not answered empty at once, the member
// straight back with another heartbeat at a token's price
// (TestTakeoverPacedMintsStarveNoPartition in e2e/ha measures the
// difference). No epoch moves.
func TestDeferredNewsWaitsForItsToken(t *testing.T) {
	w, a, ref, n := deferredNews(t, 400*time.Millisecond, time.Second)
	epochs := w.epochs("g")
	w.advance(399 * time.Millisecond)
	if msg, ok := w.replies[ref]; ok {
		t.Fatalf("the held heartbeat answered %+v before its token came", msg)
	}
	w.advance(time.Millisecond)
	got, ok := w.replies[ref].(group.News)
	if !ok || len(got.Renew) != len(n.Renew) || got.Paid != 1 || len(got.Revoke) != 0 {
		t.Fatalf("at its token the held heartbeat answered %#v, want both renewals and Paid 1", w.replies[ref])
	}
	for i, g := range got.Renew {
		if g.Epoch != n.Renew[i].Epoch {
			t.Fatalf("%s/%d renewed at epoch %d, want %d", g.Topic, g.Partition, g.Epoch, n.Renew[i].Epoch)
		}
	}
	if e := w.epochs("g"); !maps.Equal(e, epochs) {
		t.Fatalf("epochs moved: %v → %v", epochs, e)
	}
	w.heartbeat(a)
	if w.clients[a].parked == 0 {
		t.Fatalf("a's next heartbeat answered %+v, want it held: nothing new, the token handed back", w.replies[w.ref])
	}
}

// TestDeferredNewsNeverDelaysARevoke: while the heartbeat is held for
// its token, b joins and one of a's partitions is revoked — the revoke
// is answered at once, with the renewals and the token. A revoke never
// waits for tokens.
func TestDeferredNewsNeverDelaysARevoke(t *testing.T) {
	w, _, ref, _ := deferredNews(t, 900*time.Millisecond, time.Second)
	w.advance(100 * time.Millisecond)
	w.join("g", "b", "t")
	for range 5 {
		w.poll("gw")
	}
	got, ok := w.replies[ref].(group.News)
	if !ok || len(got.Revoke) != 1 {
		t.Fatalf("b joined, a partition moves: a's held heartbeat answered %#v, want the revoke at once", w.replies[ref])
	}
	if got.Paid != 1 {
		t.Fatalf("the revoke's answer handed back %d tokens, want the 1 reserved", got.Paid)
	}
}

// TestDeferredNewsPastTheWait: the token comes after the heartbeat's
// wait (Until): the heartbeat is answered empty then, the news kept, and
// the member's next heartbeat is held until the token, then answered
// with it.
func TestDeferredNewsPastTheWait(t *testing.T) {
	w, a, ref, n := deferredNews(t, 1500*time.Millisecond, time.Second)
	w.advance(time.Second)
	got, ok := w.replies[ref].(group.News)
	if !ok || len(got.Renew)+len(got.Grants)+len(got.Revoke) != 0 || got.Paid != 0 {
		t.Fatalf("at the end of its wait the held heartbeat answered %#v, want it empty", w.replies[ref])
	}
	w.heartbeat(a)
	next := w.ref
	w.advance(499 * time.Millisecond)
	if msg, ok := w.replies[next]; ok {
		t.Fatalf("the next heartbeat answered %+v before the token came", msg)
	}
	w.advance(time.Millisecond)
	if got, ok := w.replies[next].(group.News); !ok || len(got.Renew) != len(n.Renew) || got.Paid != 1 {
		t.Fatalf("at the token the next heartbeat answered %#v, want both renewals and Paid 1", w.replies[next])
	}
}
