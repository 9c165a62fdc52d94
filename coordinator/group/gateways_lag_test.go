package group_test

import (
	"slices"
	"testing"
	"time"

	"github.com/capgate/capgate/coordinator/group"
)

// Gateways forgotten for lagging (lag.go, forgetLaggingGateway): a new id
// past limits.gateways takes the place of a gateway that has polled
// without acknowledging for longer than gateway_timeout, and the lag
// rule's bound holds every fence for gateway_timeout after the forget.

// lagRunFor is lagRun for d from now.
func (w *world) lagRunFor(d time.Duration, polls map[string]func() uint64, members ...string) {
	w.t.Helper()
	w.lagRun(w.now.Add(d), 0, polls, members...)
}

// pollAsNew polls as a gateway the world drives from now on and requires
// a reset snapshot: the id was admitted.
func (w *world) pollAsNew(id string) {
	w.t.Helper()
	w.poll(id)
	if r, ok := w.replies[w.ref].(group.SyncReply); !ok || !r.Reset {
		w.t.Fatalf("new gateway %q: %#v, want a reset snapshot", id, w.replies[w.ref])
	}
	w.pollUntilParked(id)
}

// forgottenNotices returns the ids of the lag notices of forgetting.
func (w *world) forgottenNotices() []string {
	notices, _ := w.m.TakeLagging()
	var ids []string
	for _, n := range notices {
		if n.Forgotten {
			if !n.SafeByLag {
				w.t.Fatalf("forgotten notice %+v not safe by lag", n)
			}
			ids = append(ids, n.Gateway)
		}
	}
	return ids
}

func always0() uint64 { return 0 }

// TestLaggingGatewayIDsMakeRoom: sync-token holders fill the table with
// ids that poll after=0 (a reset each time, nothing acknowledged). A real
// gateway restarting under a new id is refused while they have lagged
// for no longer than gateway_timeout, then takes the place of the one
// lagging longest (not the lowest id); the forgotten record is kept for
// gateway_timeout, then deleted. Gateways that acknowledge — gw1 and gw2
// all along, the newcomers once in — are never forgotten: with only them
// left a new id is refused however long it waits.
func TestLaggingGatewayIDsMakeRoom(t *testing.T) {
	w, a := oneMember(t, func(c *group.Config) { c.Limits.Gateways = 4 })
	w.pollUntilParked("gw2")
	gt := w.cfg.GatewayTimeout
	polls := map[string]func() uint64{"rogue-b": always0}
	w.rogue("rogue-b", 0)
	w.lagRunFor(time.Second, polls, a)
	polls["rogue-a"] = always0
	w.rogue("rogue-a", 0)
	bRegistered := w.now.Add(-time.Second)

	w.lagRun(bRegistered.Add(2*gt), 0, polls, a)
	w.mustRefuseGateway("gw3") // lagging, but not for longer than gateway_timeout yet
	w.lagRunFor(200*time.Millisecond, polls, a)
	forgot := w.now
	w.pollAsNew("gw3")
	if got := w.gatewayIDs(); !slices.Equal(got, []string{"gw1", "gw2", "gw3", "rogue-a"}) {
		t.Fatalf("gateways after gw3 came: %v, want rogue-b (lagging longest) forgotten", got)
	}
	if got := w.forgottenNotices(); !slices.Equal(got, []string{"rogue-b"}) {
		t.Fatalf("forgotten notices %v, want rogue-b", got)
	}
	if !w.store.gateways["rogue-b"] {
		t.Fatal("rogue-b's record deleted at once: a restore would not know it while its bound holds")
	}
	delete(polls, "rogue-b") // it gave up, refused (409) as new while the table is full

	w.lagRunFor(time.Second, polls, a)
	w.pollAsNew("gw4") // rogue-a lagged longer than gateway_timeout too
	if got := w.gatewayIDs(); !slices.Equal(got, []string{"gw1", "gw2", "gw3", "gw4"}) {
		t.Fatalf("gateways after gw4 came: %v", got)
	}
	w.lagRun(forgot.Add(gt), 0, nil, a)
	if !w.store.gateways["rogue-b"] {
		t.Fatal("rogue-b's record deleted before its bound lifted")
	}
	w.lagRunFor(200*time.Millisecond, nil, a)
	if w.store.gateways["rogue-b"] || !w.store.gateways["rogue-a"] {
		t.Fatalf("store %v: want rogue-b deleted once its bound lifted, rogue-a kept until its own", w.store.gateways)
	}
	w.lagRunFor(3*gt, nil, a)
	w.mustRefuseGateway("gw5") // every known gateway acknowledges
	if got := w.gatewayIDs(); !slices.Equal(got, []string{"gw1", "gw2", "gw3", "gw4"}) {
		t.Fatalf("gateways: %v", got)
	}
}

// TestForgottenLaggingGatewayHoldsFences: after a lagging gateway was
// forgotten, a fence waits gateway_timeout however promptly the known
// gateways acknowledge it (the lag rule's bound, held on the forgotten
// gateway's behalf), and only fences appended once the bound lifted go
// by acknowledgements alone.
func TestForgottenLaggingGatewayHoldsFences(t *testing.T) {
	w, a := oneMember(t, func(c *group.Config) { c.Limits.Gateways = 2 })
	gt := w.cfg.GatewayTimeout
	polls := map[string]func() uint64{"rogue": always0}
	w.rogue("rogue", 0)
	w.lagRunFor(2*gt+time.Second, polls, a)
	w.pollAsNew("gw2")
	forgot := w.now

	ref := w.nextRef()
	w.step(group.RevokePartition{Ref: ref, Group: "g", Topic: "t", Partition: 0})
	answered := w.lagRun(forgot.Add(gt+2*time.Second), ref, nil, a)
	if answered.IsZero() || !answered.After(forgot.Add(gt)) {
		t.Fatalf("revoke fenced at the forget answered %s after it (zero: never), want just past gateway_timeout (%s)", answered.Sub(forgot), gt)
	}
	ref = w.nextRef()
	w.step(group.RevokePartition{Ref: ref, Group: "g", Topic: "t", Partition: 1})
	start := w.now
	if got := w.lagRun(start.Add(time.Second), ref, nil, a); got.IsZero() || got.Sub(start) > 200*time.Millisecond {
		t.Fatalf("revoke after the bound lifted answered %s after it (zero: never), want as soon as gw1 and gw2 acknowledged", got.Sub(start))
	}
}

// TestRecoveredGatewayForgottenIsSafe is the case that makes the bound
// necessary. gw2 applied nothing for longer than twice gateway_timeout,
// polling on with its stale after; then it recovers: it applies an answer
// (in sync again, its sync_timeout counting from that poll) and its next
// poll, which acknowledges it, has not arrived when gw3 takes its place.
// A partition then moves from a to b. gw2 still serves a's capability
// under the view it applied — the world's safety check (no two holders
// usable at any gateway in sync, gw2 included) holds only because b's
// grant waits gateway_timeout from the fence.
func TestRecoveredGatewayForgottenIsSafe(t *testing.T) {
	w, a := twoGateways(t)
	w.cfg.Limits.Gateways = 2
	w.restart(0) // the bound, on the world's config
	w.pollUntilParked("gw1")
	w.pollUntilParked("gw2")
	gt := w.cfg.GatewayTimeout

	w.stuck["gw2"] = true
	seq := w.gateways["gw2"].seq
	broken := map[string]func() uint64{"gw2": func() uint64 { return seq }}
	w.rogue("gw2", seq) // answers its held poll: nothing new
	revoke := w.nextRef()
	w.step(group.RevokePartition{Ref: revoke, Group: "g", Topic: "t", Partition: 1})
	w.lagRunFor(2*gt+time.Second, broken, a)
	mustReply[group.RevokeReply](t, w, revoke) // by lag: gw2 never acknowledged it
	w.poll("gw2")                              // it recovers: the answer is applied, the ack not yet sent
	if w.gateways["gw2"].seq == seq || w.gateways["gw2"].lastOK != w.now {
		t.Fatalf("gw2 did not apply a fresh answer: %+v", w.gateways["gw2"])
	}
	w.pollAsNew("gw3")
	if got := w.gatewayIDs(); !slices.Equal(got, []string{"gw1", "gw3"}) {
		t.Fatalf("gateways: %v, want gw2 forgotten", got)
	}

	b := w.join("g", "b", "t")
	fenced := w.now
	moving := w.revokingPartition("g")
	for w.now.Before(fenced.Add(gt + time.Second)) {
		w.keepAliveUntil(w.now.Add(100*time.Millisecond), a, b)
		w.release(a, -1)
		if p := w.partition("g", moving.Topic, moving.Partition); p.State == group.Owned {
			if p.Owner != b || !w.now.After(fenced.Add(gt)) {
				t.Fatalf("%s/%d owned by %s %s after the fence (b is %s)", p.Topic, p.Partition, p.Owner, w.now.Sub(fenced), b)
			}
			return
		}
	}
	t.Fatalf("%s/%d not handed to b %s after the fence", moving.Topic, moving.Partition, gt+time.Second)
}

// TestForgottenLaggingGatewayRestored: a restart while the bound holds
// brings the forgotten gateway back as known (its record stands for the
// bound; the table may exceed the limit after a restore), seen at the
// restore with nothing acknowledged; once the bound lifted, its record is
// gone and a restart forgets it for good.
func TestForgottenLaggingGatewayRestored(t *testing.T) {
	w, a := oneMember(t, func(c *group.Config) { c.Limits.Gateways = 2 })
	gt := w.cfg.GatewayTimeout
	w.rogue("rogue", 0)
	w.lagRunFor(2*gt+time.Second, map[string]func() uint64{"rogue": always0}, a)
	w.pollAsNew("gw2")
	forgot := w.now

	w.restart(time.Second)
	if got := w.gatewayIDs(); !slices.Equal(got, []string{"gw1", "gw2", "rogue"}) {
		t.Fatalf("gateways restored inside the bound: %v, want rogue back", got)
	}
	ref := w.nextRef()
	w.step(group.RevokePartition{Ref: ref, Group: "g", Topic: "t", Partition: 0})
	restored := w.now
	if got := w.lagRun(restored.Add(gt+time.Second), ref, nil, a); got.IsZero() || !got.After(restored.Add(gt)) {
		t.Fatalf("revoke after the restore answered %s after it, want past gateway_timeout (rogue silent)", got.Sub(restored))
	}
	if !w.now.After(forgot.Add(gt)) {
		t.Fatal("test too short")
	}
	w.pollAsNew("gw3") // rogue, silent, makes room
	w.restart(time.Second)
	if got := w.gatewayIDs(); !slices.Equal(got, []string{"gw1", "gw2", "gw3"}) {
		t.Fatalf("gateways restored: %v", got)
	}
}

// TestServeLaggingGatewayNeverForgotten: under silent_gateways: serve a
// gateway that cannot sync keeps serving, so a lagging gateway is never
// forgotten: the new id is refused however long the lag.
func TestServeLaggingGatewayNeverForgotten(t *testing.T) {
	w, a := oneMember(t, func(c *group.Config) {
		c.Limits.Gateways = 2
		c.SilentGateways = group.SilentGatewaysServe
	})
	w.rogue("rogue", 0)
	w.lagRunFor(3*w.cfg.GatewayTimeout, map[string]func() uint64{"rogue": always0}, a)
	w.mustRefuseGateway("gw2")
	if got := w.gatewayIDs(); !slices.Equal(got, []string{"gw1", "rogue"}) {
		t.Fatalf("gateways: %v", got)
	}
}
