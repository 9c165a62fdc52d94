package group_test

import (
	"testing"
	"time"

	"github.com/capgate/capgate/coordinator/assign"
	"github.com/capgate/capgate/coordinator/group"
)

// The lag rule (lag.go): a gateway that polls without acknowledging is
// trusted as much as a silent one — under silent_gateways: fence, a fence
// appended more than gateway_timeout ago no longer waits for it.

// rogue sends one poll as gateway id with the given after, as a
// sync-token holder would: the world neither drives nor applies it (it
// serves nothing, so checkSafety has nothing to check for it).
func (w *world) rogue(id string, after uint64) {
	w.t.Helper()
	w.step(group.SyncPoll{Ref: w.nextRef(), Gateway: id, After: after})
}

// lagRun advances time to `to` in 100 ms steps: the members heartbeat,
// the gateways the world drives poll (but not the stuck ones), and each
// poller in polls sends one poll per step with its after. It returns
// when ref was answered (zero when not yet).
func (w *world) lagRun(to time.Time, ref group.Ref, polls map[string]func() uint64, members ...string) time.Time {
	w.t.Helper()
	var answered time.Time
	for w.now.Before(to) {
		w.keepAliveUntil(minTime(w.now.Add(100*time.Millisecond), to), members...)
		for _, id := range sortedMapKeys(polls) {
			w.rogue(id, polls[id]())
		}
		if _, ok := w.replies[ref]; ok && answered.IsZero() {
			answered = w.now
		}
	}
	return answered
}

// twoGateways is oneMember (admin_test.go) with gw2 in sync too.
func twoGateways(t *testing.T) (*world, string) {
	t.Helper()
	w, a := oneMember(t)
	w.pollUntilParked("gw2")
	return w, a
}

// revokeGW2Holds revokes t/partition while gw2, answered the fence,
// takes 5 s before polling again, and checks the revoke waits that long;
// it returns the revoke and when it was fenced.
func (w *world) revokeGW2Holds(partition int32, polls map[string]func() uint64, a string) (group.Ref, time.Time) {
	w.t.Helper()
	w.stuck["gw2"] = true
	ref := w.nextRef()
	w.step(group.RevokePartition{Ref: ref, Group: "g", Topic: "t", Partition: partition})
	fenced := w.now
	if got := w.lagRun(fenced.Add(5*time.Second), ref, polls, a); !got.IsZero() {
		w.t.Fatalf("revoke answered %s after the fence while gw2 had not acknowledged it", got.Sub(fenced))
	}
	w.stuck["gw2"] = false
	return ref, fenced
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// TestNonAckingPollerDoesNotStallRevokes is the attack: a sync-token
// holder polls as gateway "rogue" every 100 ms and never acknowledges —
// after=0 (each answer a reset) or a fixed stale after. Before the lag
// rule it counted live and unacknowledged for ever, and the admin revoke
// (every revocation of every group) waited for the revoked capabilities
// to expire. Now the revoke is answered once its fence is older than
// gateway_timeout, not a step sooner; the rogue is reported lagging once,
// and the honest gateway never.
func TestNonAckingPollerDoesNotStallRevokes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after func(stale uint64) uint64
	}{
		{"after=0", func(uint64) uint64 { return 0 }},
		{"stale after", func(stale uint64) uint64 { return stale }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, a := oneMember(t)
			stale := w.m.SyncSeq()
			after := func() uint64 { return tc.after(stale) }
			w.rogue("rogue", after())
			w.lagRun(w.now.Add(time.Second), 0, map[string]func() uint64{"rogue": after}, a)
			w.m.TakeLagging()

			ref := w.nextRef()
			w.step(group.RevokePartition{Ref: ref, Group: "g", Topic: "t", Partition: 0})
			fenced := w.now
			gt := w.cfg.GatewayTimeout
			polls := map[string]func() uint64{"rogue": after}
			if got := w.lagRun(fenced.Add(gt), ref, polls, a); !got.IsZero() {
				t.Fatalf("revoke answered %s after its fence, before gateway_timeout (%s)", got.Sub(fenced), gt)
			}
			answered := w.lagRun(fenced.Add(gt+time.Second), ref, polls, a)
			if answered.IsZero() {
				t.Fatalf("revoke still waiting %s after its fence: a gateway that polls without acknowledging stalls it", gt+time.Second)
			}
			if d := answered.Sub(fenced); d <= gt || d > gt+100*time.Millisecond {
				t.Fatalf("revoke answered %s after its fence, want just past gateway_timeout %s", d, gt)
			}
			mustReply[group.RevokeReply](t, w, ref)

			lags := w.m.GatewayLags()
			if !lags["rogue"].Lagging || lags["gw1"].Lagging || !lags["gw1"].UnackedSince.IsZero() {
				t.Fatalf("gateway lags %+v: want rogue lagging, gw1 caught up", lags)
			}
			if since := lags["rogue"].UnackedSince; since.IsZero() || since.After(fenced) {
				t.Fatalf("rogue unacknowledged since %s, want at or before the fence at %s", since, fenced)
			}
			notices, dropped := w.m.TakeLagging()
			if len(notices) != 1 || dropped != 0 || notices[0].Gateway != "rogue" || !notices[0].SafeByLag ||
				notices[0].Acked != tc.after(stale) || notices[0].Since.After(fenced) {
				t.Fatalf("lag notices %+v (%d dropped), want one for rogue, safe by lag, acked %d", notices, dropped, tc.after(stale))
			}

			// Once per episode: it keeps lagging through a second revoke.
			ref = w.nextRef()
			w.step(group.RevokePartition{Ref: ref, Group: "g", Topic: "t", Partition: 1})
			if answered := w.lagRun(w.now.Add(gt+time.Second), ref, polls, a); answered.IsZero() {
				t.Fatal("second revoke still waiting")
			}
			if notices, _ := w.m.TakeLagging(); len(notices) != 0 {
				t.Fatalf("lag notices %+v while the same episode goes on", notices)
			}
			// It catches up: the episode ends; it lags again: a new one.
			w.rogue("rogue", w.m.SyncSeq())
			if w.m.GatewayLags()["rogue"].Lagging {
				t.Fatal("rogue still lagging after acknowledging everything")
			}
			w.step(group.RevokePartition{Ref: w.nextRef(), Group: "g", Topic: "t", Partition: 0})
			w.lagRun(w.now.Add(gt+time.Second), 0, polls, a)
			if notices, _ := w.m.TakeLagging(); len(notices) != 1 || notices[0].Gateway != "rogue" {
				t.Fatalf("lag notices %+v, want a new episode for rogue", notices)
			}
		})
	}
}

// TestHonestGatewayHoldsRevokes: a gateway that acknowledges keeps a
// revoke waiting until it does — here 5 s, applying the update — however
// the revoke's other gateways do, and with a non-acking poller about: the
// lag rule never answers before gateway_timeout.
func TestHonestGatewayHoldsRevokes(t *testing.T) {
	w, a := twoGateways(t)
	ref, _ := w.revokeGW2Holds(0, nil, a) // its held poll is answered with the fence; it polls again in 5 s
	w.pollUntilParked("gw2")
	mustReply[group.RevokeReply](t, w, ref)

	// With a rogue polling after=0 as well, gw2's ack no longer suffices
	// before gateway_timeout, and gw2 still decides nothing early.
	w.settle("g")
	polls := map[string]func() uint64{"rogue": func() uint64 { return 0 }}
	ref, fenced := w.revokeGW2Holds(1, polls, a)
	if got := w.lagRun(fenced.Add(w.cfg.GatewayTimeout), ref, polls, a); !got.IsZero() {
		t.Fatalf("revoke answered %s after the fence, before gateway_timeout, with rogue unacknowledged", got.Sub(fenced))
	}
	if got := w.lagRun(fenced.Add(w.cfg.GatewayTimeout+time.Second), ref, polls, a); got.IsZero() {
		t.Fatal("revoke still waiting for a poller that acknowledges nothing")
	}
	if lags := w.m.GatewayLags(); lags["gw1"].Lagging || lags["gw2"].Lagging || !lags["rogue"].Lagging {
		t.Fatalf("gateway lags %+v: only rogue lags", lags)
	}
}

// TestBrokenGatewayIsSafeByLag: a gateway that keeps polling with its last
// after but applies nothing (a bug, a full disk) — its view, in the
// world, stays as it was, and it self-fences sync_timeout after its last
// applied answer. A partition moves from a to b meanwhile: b gets it
// gateway_timeout after the fence, not before, and the world's safety
// check (no two holders usable at any gateway in sync, the broken one
// included) holds at every step.
func TestBrokenGatewayIsSafeByLag(t *testing.T) {
	w, a := twoGateways(t)

	// gw2 breaks: a poll of its own answers its held one (nothing new);
	// from now on its polls carry that after and their answers are lost.
	w.stuck["gw2"] = true
	seq := w.gateways["gw2"].seq
	broken := map[string]func() uint64{"gw2": func() uint64 { return seq }}
	w.rogue("gw2", seq)
	b := w.join("g", "b", "t")
	fenced := w.now
	moving := w.revokingPartition("g")
	gt := w.cfg.GatewayTimeout
	for w.now.Before(fenced.Add(gt + time.Second)) {
		w.lagRun(w.now.Add(100*time.Millisecond), 0, broken, a, b)
		w.release(a, -1)
		if p := w.partition("g", moving.Topic, moving.Partition); p.State == group.Owned {
			if p.Owner != b || !w.now.After(fenced.Add(gt)) {
				t.Fatalf("%s/%d owned by %s %s after the fence (b is %s, gateway_timeout %s)", p.Topic, p.Partition, p.Owner, w.now.Sub(fenced), b, gt)
			}
			return
		}
	}
	t.Fatalf("%s/%d still %v %s after the fence: a gateway applying nothing stalls the handoff",
		moving.Topic, moving.Partition, w.partition("g", moving.Topic, moving.Partition).State, gt+time.Second)
}

// TestServeNonAckingPollerWaitsForExpiry: under silent_gateways: serve a
// gateway that cannot sync keeps serving, so lag makes nobody safe, as
// silence does not: a poller that acknowledges nothing holds the revoke
// until the revoked capability expired everywhere. It is reported
// lagging, not safe by lag.
func TestServeNonAckingPollerWaitsForExpiry(t *testing.T) {
	w, a := oneMember(t, func(c *group.Config) { c.SilentGateways = group.SilentGatewaysServe })
	exp := w.clients[a].held[assign.Partition{Topic: "t", Partition: 0}].ExpiresAt

	polls := map[string]func() uint64{"rogue": func() uint64 { return 0 }}
	w.rogue("rogue", 0)
	ref := w.nextRef()
	w.step(group.RevokePartition{Ref: ref, Group: "g", Topic: "t", Partition: 0})
	expired := exp.Add(w.cfg.Leeway + w.cfg.MaxClockSkew)
	if got := w.lagRun(expired, ref, polls, a); !got.IsZero() {
		t.Fatalf("revoke answered at %s, before the revoked capability expired everywhere (%s)", got, expired)
	}
	if got := w.lagRun(expired.Add(time.Second), ref, polls, a); got.IsZero() {
		t.Fatal("revoke not answered once the revoked capability expired")
	}
	notices, _ := w.m.TakeLagging()
	if len(notices) != 1 || notices[0].Gateway != "rogue" || notices[0].SafeByLag {
		t.Fatalf("lag notices %+v, want rogue, not safe by lag", notices)
	}
}

// TestLagCountsFromRestore: the machine does not know when the seqs
// before a restart were appended, so the lag rule counts gateway_timeout
// for them from the restore: a handoff pending across a restart with a
// non-acking poller completes gateway_timeout after the restore, not at
// once.
func TestLagCountsFromRestore(t *testing.T) {
	w, a := oneMember(t)
	polls := map[string]func() uint64{"rogue": func() uint64 { return 0 }}
	w.rogue("rogue", 0)
	w.step(group.RevokePartition{Ref: w.nextRef(), Group: "g", Topic: "t", Partition: 0})
	w.lagRun(w.now.Add(10*time.Second), 0, polls, a)
	w.release(a, -1)
	if p := w.partition("g", "t", 0); p.State != group.Revoking {
		t.Fatalf("t/0 %v before the restart, want revoking", p.State)
	}

	w.restart(time.Second)
	restored := w.now
	gt := w.cfg.GatewayTimeout
	for w.now.Before(restored.Add(gt + time.Second)) {
		w.lagRun(w.now.Add(100*time.Millisecond), 0, polls, a)
		w.release(a, -1)
		if p := w.partition("g", "t", 0); p.State != group.Revoking {
			if !w.now.After(restored.Add(gt)) {
				t.Fatalf("t/0 %v %s after the restore, before gateway_timeout (%s) counted from it", p.State, w.now.Sub(restored), gt)
			}
			return
		}
	}
	t.Fatalf("t/0 still revoking %s after the restore", gt+time.Second)
}

// TestNewGatewayIsNotLagging: a gateway that starts (after=0: a reset)
// on a coordinator that ran longer than gateway_timeout has acknowledged
// nothing older than that — but it just came: it is not lagging, and
// acknowledging its reset ends that; one that keeps polling after=0 for
// gateway_timeout is.
func TestNewGatewayIsNotLagging(t *testing.T) {
	w, a := oneMember(t)
	w.keepAliveUntil(w.now.Add(2*w.cfg.GatewayTimeout), a)
	w.noLagNotices()
	w.rogue("late", 0)
	w.rogue("rogue", 0)
	if lags := w.m.GatewayLags(); lags["late"].Lagging || lags["rogue"].Lagging {
		t.Fatalf("gateways just registered reported lagging: %+v", lags)
	}
	w.pollUntilParked("late") // acknowledges the reset
	polls := map[string]func() uint64{"rogue": func() uint64 { return 0 }}
	w.lagRun(w.now.Add(w.cfg.GatewayTimeout-time.Second), 0, polls, a)
	w.noLagNotices()
	w.lagRun(w.now.Add(2*time.Second), 0, polls, a)
	if notices, _ := w.m.TakeLagging(); len(notices) != 1 || notices[0].Gateway != "rogue" {
		t.Fatalf("lag notices %+v, want rogue's only", notices)
	}
}

// noLagNotices requires no gateway to have begun lagging.
func (w *world) noLagNotices() {
	w.t.Helper()
	if notices, dropped := w.m.TakeLagging(); len(notices)+dropped != 0 {
		w.t.Fatalf("lag notices %+v (%d more)", notices, dropped)
	}
}
