package gateway

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/capgate/capgate/gateway/authz"
	"github.com/capgate/capgate/gateway/guard"
	"github.com/capgate/capgate/ocap"
)

// The per-holder and per-tenant counts keep their zeros between fetches
// (no map churn one fetch at a time) and sweep them once the maps grow:
// the caps hold throughout, and the maps stay bounded by ~2× the
// holders and tenants with fetches in flight (at least minSweep).
func TestInflightCountsStayBoundedAndCapped(t *testing.T) {
	f := newInflight(guard.Bugs{}, 1000, 1, 2)
	claims := func(holder, tenant string) *ocap.Claims {
		p := int32(0)
		return &ocap.Claims{ID: holder, Subject: "s", Tenant: tenant, Group: "g", Topic: "t", Partition: &p}
	}
	req := authz.Request{Topic: "t", Op: ocap.OpFetch}
	// One holder, one at a time, many times: its counts come back to 0
	// and its caps still apply.
	a := claims("a", "ta")
	for range 3 {
		e, _, hit := f.start(a, req)
		if hit != hitNone {
			t.Fatalf("first fetch refused: %v", hit)
		}
		if _, _, hit := f.start(a, req); hit != hitHolder {
			t.Fatalf("second fetch of a holder capped at 1: %v, want hitHolder", hit)
		}
		f.finish(e)
	}
	// The tenant cap across holders.
	e1, _, _ := f.start(claims("b1", "tb"), req)
	e2, _, _ := f.start(claims("b2", "tb"), req)
	if _, _, hit := f.start(claims("b3", "tb"), req); hit != hitTenant {
		t.Fatalf("third fetch of a tenant capped at 2: %v, want hitTenant", hit)
	}
	f.finish(e1)
	f.finish(e2)
	// Many holders one after another: the zeros are swept.
	for i := range 5 * minSweep {
		h := strconv.Itoa(i)
		e, _, hit := f.start(claims("h"+h, "t"+h), req)
		if hit != hitNone {
			t.Fatalf("fetch %d refused: %v", i, hit)
		}
		f.finish(e)
	}
	if n := len(f.byHolder) + len(f.byTenant); n > minSweep+2 {
		t.Fatalf("%d counts kept with nothing in flight, want at most minSweep (%d) and the last", n, minSweep)
	}
	if f.count() != 0 {
		t.Fatalf("%d in flight, want 0", f.count())
	}
}

// revoke waits for each fetch it cancels until that fetch finished —
// the sync client acknowledges an update only then — though a fetch's
// done channel is made only when someone waits for it.
func TestRevokeWaitsForTheCancelledFetchToFinish(t *testing.T) {
	f := newInflight(guard.Bugs{}, 10, 10, 10)
	p := int32(0)
	c := &ocap.Claims{ID: "a", Subject: "s", Group: "g", Topic: "t", Partition: &p, Ops: ocap.Ops(ocap.OpFetch), ExpiresAt: 1} // refused: expired
	e, fctx, _ := f.start(c, authz.Request{Topic: "t", Op: ocap.OpFetch})
	revoked := make(chan int, 1)
	go func() {
		revoked <- f.revoke(context.Background(), authz.Changes{Reset: true}, authz.NewView(authz.Config{}), time.Now())
	}()
	<-fctx.Done() // cancelled by revoke
	select {
	case n := <-revoked:
		t.Fatalf("revoke returned (%d) before the fetch it cancelled finished", n)
	default:
	}
	f.finish(e)
	select {
	case n := <-revoked:
		if n != 1 {
			t.Fatalf("revoke cancelled %d fetches, want 1", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("revoke still waits after the fetch it cancelled finished")
	}
}

// A fetch whose holder has a count (at 0) but whose tenant has none may
// be the one that sweeps: the holder's zero is swept with the others, and
// the fetch must count on the holder's new count, not on the one it
// looked up before the sweep — else its holder's cap no longer sees it.
func TestInflightSweepDuringAStartKeepsTheCap(t *testing.T) {
	f := newInflight(guard.Bugs{}, 100_000, 1, 100)
	p := int32(0)
	claims := func(holder, tenant string) *ocap.Claims {
		return &ocap.Claims{ID: holder, Subject: "s", Tenant: tenant, Group: "g", Topic: "t", Partition: &p}
	}
	req := authz.Request{Topic: "t", Op: ocap.OpFetch}
	e, _, _ := f.start(claims("x", "tx"), req)
	f.finish(e) // x and tx at 0, kept
	for i := 0; len(f.byHolder)+len(f.byTenant) < f.sweepAt; i++ {
		e, _, _ := f.start(claims("h"+strconv.Itoa(i), "t"+strconv.Itoa(i)), req)
		f.finish(e)
	}
	if _, _, hit := f.start(claims("x", "fresh"), req); hit != hitNone { // sweeps
		t.Fatalf("x's first fetch refused: %v", hit)
	}
	if n := len(f.byHolder) + len(f.byTenant); n > 2 {
		t.Fatalf("%d counts after the sweep, want x's and fresh's", n)
	}
	if _, _, hit := f.start(claims("x", "fresh2"), req); hit != hitHolder {
		t.Fatalf("x's second fetch with one in flight (cap 1): %v, want hitHolder", hit)
	}
}

// BenchmarkInflightOneAtATime is the in-flight registry's part of a
// one-at-a-time fetch: start (the caps, the registry, the counts) and
// finish, with 64 fetches of other holders, tenants and partitions in
// flight.
func BenchmarkInflightOneAtATime(b *testing.B) {
	f := newInflight(guard.Bugs{}, 10_000, 100, 1000)
	claims := func(id string, p int32) *ocap.Claims {
		return &ocap.Claims{ID: "capability-" + id, Subject: "member-" + id, Tenant: "oauth:client-" + id, Group: "group", Topic: "latency", Partition: &p, Epoch: 3}
	}
	for i := range 64 {
		c := claims(string(rune('a'+i%26))+string(rune('a'+i/26)), int32(1+i))
		f.start(c, authz.Request{Topic: "latency", Partition: c.PartitionNumber(), Op: ocap.OpFetch})
	}
	c := claims("this", 0)
	req := authz.Request{Topic: "latency", Partition: 0, Op: ocap.OpFetch}
	for b.Loop() {
		e, _, _ := f.start(c, req)
		f.finish(e)
	}
}
