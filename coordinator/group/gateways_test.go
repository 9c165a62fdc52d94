package group_test

import (
	"slices"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/group"
)

// gatewayIDs lists the gateways the machine knows, sorted.
func (w *world) gatewayIDs() []string {
	var ids []string
	for _, gw := range w.m.Gateways() {
		ids = append(ids, gw.ID)
	}
	return ids
}

// pollNew sends one poll for an id the world does not drive and returns
// the reply.
func (w *world) pollNew(id string) group.Message {
	w.t.Helper()
	ref := w.nextRef()
	w.step(group.SyncPoll{Ref: ref, Gateway: id})
	return w.replies[ref]
}

// mustRefuseGateway checks that a poll naming id was refused with
// limit_exceeded naming limits.gateways.
func (w *world) mustRefuseGateway(id string) {
	w.t.Helper()
	r, ok := w.pollNew(id).(group.Rejected)
	if !ok || r.Code != api.CodeLimitExceeded || r.Details["limit"] != "coordinator.groups.limits.gateways" ||
		r.Details["max"] != int64(w.cfg.Limits.Gateways) {
		w.t.Fatalf("poll as new gateway %q: %#v, want limit_exceeded naming limits.gateways", id, r)
	}
}

// revokeHeldBackByGW2: gateways gw1 and gw2, member a holding t/0 and
// t/1 of group g, and an admin revoke of t/0 only gw2 holds back.
func revokeHeldBackByGW2(t *testing.T, mutate func(*group.Config)) (w *world, a string, revoke group.Ref) {
	t.Helper()
	w = newWorld(t, mutate)
	w.topics(map[string]int32{"t": 2})
	w.pollUntilParked("gw1")
	w.pollUntilParked("gw2")
	a = w.join("g", "a", "t")
	w.settle("g")
	return w, a, w.revokeWaitingFor("gw2")
}

// revokeWaitingFor starts an admin revoke of t/0 that the stuck gateway
// holds back (every other gateway acknowledged it) and returns its ref.
func (w *world) revokeWaitingFor(stuck string) group.Ref {
	w.t.Helper()
	w.stuck[stuck] = true
	ref := w.nextRef()
	w.step(group.RevokePartition{Ref: ref, Group: "g", Topic: "t", Partition: 0})
	for _, id := range sortedMapKeys(w.gateways) {
		if !w.stuck[id] {
			w.pollUntilParked(id)
		}
	}
	if msg, ok := w.replies[ref]; ok {
		w.t.Fatalf("revoke answered %#v while %s has not acknowledged", msg, stuck)
	}
	return ref
}

// TestGatewayIDsBounded: past limits.gateways a new gateway id is refused
// and nothing changes — the revoke it might have disturbed still waits
// for the known gateway's ack, the table and the store are as they were,
// and the known gateway still polls and acks; once a known gateway is
// silent longer than gateway_timeout (silent_gateways: fence, so it is
// safe for every fence already) a new id takes its place, and the
// forgotten one is refused in turn while the table is full.
func TestGatewayIDsBounded(t *testing.T) {
	w, a, revoke := revokeHeldBackByGW2(t, func(c *group.Config) { c.Limits.Gateways = 2 })
	writes := w.store.writes

	for _, id := range []string{"gw3", "random-1", "random-2"} {
		w.mustRefuseGateway(id)
	}
	if got := w.gatewayIDs(); !slices.Equal(got, []string{"gw1", "gw2"}) {
		t.Fatalf("gateways after refusals: %v", got)
	}
	if w.store.writes != writes || w.store.gateways["gw3"] {
		t.Fatalf("refused polls persisted %d records (gw3 stored: %t)", w.store.writes-writes, w.store.gateways["gw3"])
	}
	if _, ok := w.replies[revoke]; ok || !w.revoking("g") {
		t.Fatalf("refused polls released the revoke: %#v", w.replies[revoke])
	}
	w.stuck["gw2"] = false
	w.pollUntilParked("gw2") // a known gateway is never refused, and its ack decides
	mustReply[group.RevokeReply](t, w, revoke)
	w.settle("g")

	// gw2 stops without leaving; gw1 keeps polling.
	w.stuck["gw2"] = true
	w.keepAliveUntil(w.now.Add(w.cfg.GatewayTimeout-time.Second), a)
	w.mustRefuseGateway("gw3") // gw2 not silent long enough yet
	w.keepAliveUntil(w.now.Add(2*time.Second), a)
	if r, ok := w.pollNew("gw3").(group.SyncReply); !ok || !r.Reset {
		t.Fatalf("new gateway once gw2 is silent: %#v, want a reset snapshot", w.replies[w.ref])
	}
	if got := w.gatewayIDs(); !slices.Equal(got, []string{"gw1", "gw3"}) {
		t.Fatalf("gateways after gw3 took gw2's place: %v", got)
	}
	if w.store.gateways["gw2"] || !w.store.gateways["gw3"] {
		t.Fatalf("store: %v, want gw2 deleted and gw3 kept", w.store.gateways)
	}
	w.mustRefuseGateway("gw2") // gw1 and gw3 are live: gw2 comes back as new, and waits
}

// TestServingGatewayNeverForgotten: with silent_gateways: serve a silent
// gateway may still serve the capabilities a fence revokes, so the bound
// never forgets it: a new id is refused, the revoke keeps waiting for its
// ack (or the capabilities' expiry), and a leave on its behalf makes room.
func TestServingGatewayNeverForgotten(t *testing.T) {
	w, a, revoke := revokeHeldBackByGW2(t, func(c *group.Config) {
		c.Limits.Gateways = 2
		c.SilentGateways = group.SilentGatewaysServe
	})
	w.keepAliveUntil(w.now.Add(2*w.cfg.GatewayTimeout), a)
	w.mustRefuseGateway("gw3")
	if got := w.gatewayIDs(); !slices.Equal(got, []string{"gw1", "gw2"}) {
		t.Fatalf("gateways: %v, want gw2 kept", got)
	}
	if _, ok := w.replies[revoke]; ok {
		t.Fatalf("revoke answered %#v while a serving gateway has not acknowledged", w.replies[revoke])
	}
	leave := w.nextRef()
	w.step(group.GatewayLeave{Ref: leave, Gateway: "gw2"})
	mustReply[group.RevokeReply](t, w, revoke)
	if r, ok := w.pollNew("gw3").(group.SyncReply); !ok || !r.Reset {
		t.Fatalf("new gateway after gw2 left: %#v", w.replies[w.ref])
	}
}

// TestRestoredGatewaysPastTheBound: gateways restored after the bound was
// lowered all stay known and keep polling; new ids wait.
func TestRestoredGatewaysPastTheBound(t *testing.T) {
	w := newWorld(t)
	for _, id := range []string{"gw1", "gw2", "gw3"} {
		w.pollUntilParked(id)
	}
	w.cfg.Limits.Gateways = 2
	w.restart(time.Second)
	for _, id := range []string{"gw1", "gw2", "gw3"} {
		w.pollUntilParked(id)
	}
	w.mustRefuseGateway("gw4")
	if got := w.gatewayIDs(); !slices.Equal(got, []string{"gw1", "gw2", "gw3"}) {
		t.Fatalf("gateways after the restart: %v", got)
	}
}
