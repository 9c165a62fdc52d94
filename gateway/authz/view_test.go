package authz

import (
	"reflect"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/ocap"
)

func fence(p int32, e uint64) api.Fence {
	return api.Fence{Group: "billing", Topic: "orders", Partition: p, Epoch: e}
}

func TestFencesOnlyRise(t *testing.T) {
	v := newView()
	ch := mustApply(t, v, api.SyncResponse{Seq: 1, Fences: []api.Fence{fence(1, 5), fence(0, 3)}}, t0)
	if want := []api.Fence{fence(0, 3), fence(1, 5)}; !reflect.DeepEqual(ch.Raised, want) {
		t.Fatalf("raised %v, want %v (sorted)", ch.Raised, want)
	}
	ch = mustApply(t, v, api.SyncResponse{Seq: 2, Fences: []api.Fence{fence(1, 4), fence(0, 3)}}, t0)
	if len(ch.Raised) != 0 || v.Fence("billing", "orders", 1) != 5 || v.Fence("billing", "orders", 0) != 3 {
		t.Fatalf("lower fence applied: raised %v, fences %d %d", ch.Raised, v.Fence("billing", "orders", 1), v.Fence("billing", "orders", 0))
	}
	if v.Raise("billing", "orders", 1, 5) || v.Raise("billing", "orders", 1, 2) {
		t.Fatal("Raise to an equal or lower epoch reported a change")
	}
	if !v.Raise("billing", "orders", 1, 8) || v.Fence("billing", "orders", 1) != 8 {
		t.Fatal("Raise did not move the fence up")
	}
	ch = mustApply(t, v, api.SyncResponse{Seq: 3, Fences: []api.Fence{fence(1, 7)}}, t0)
	if len(ch.Raised) != 0 || v.Fence("billing", "orders", 1) != 8 {
		t.Fatal("sync lowered a fence raised by a capability")
	}
	if v.Seq() != 3 {
		t.Fatalf("seq %d", v.Seq())
	}
}

func fullUpdate(t *testing.T, seq uint64) api.SyncResponse {
	return api.SyncResponse{
		Seq:            seq,
		Keys:           []api.JWK{testJWK(t, 1)},
		Fences:         []api.Fence{fence(0, 2), fence(1, 9)},
		Denied:         []api.Denied{{JTI: jti(3), Exp: t0.Unix() + 30}},
		RevokedMembers: []api.RevokedMember{{Group: "billing", MemberID: "m-9", Until: t0.Unix() + 30}},
		QoS:            []api.QoSOverride{{ID: "q1", Selector: api.QoSSelector{Holder: "member-1"}, LogLevel: "debug", Until: t0.Unix() + 30}},
	}
}

func TestApplyIdempotent(t *testing.T) {
	for _, reset := range []bool{false, true} {
		v := newView()
		u := fullUpdate(t, 4)
		u.Reset = reset
		first := mustApply(t, v, u, t0)
		once := v.Snapshot()
		second := mustApply(t, v, u, t0)
		if !reflect.DeepEqual(once, v.Snapshot()) {
			t.Fatalf("reset=%v: second apply changed the view:\n%+v\n%+v", reset, once, v.Snapshot())
		}
		if len(first.Raised) != 2 || !first.Revoked || !first.KeysChanged {
			t.Fatalf("reset=%v: first apply changes %+v", reset, first)
		}
		if len(second.Raised) != 0 || second.KeysChanged || (second.Revoked && !reset) {
			t.Fatalf("reset=%v: second apply reported changes %+v", reset, second)
		}
	}
}

func TestResetReplaces(t *testing.T) {
	v := newView()
	mustApply(t, v, fullUpdate(t, 4), t0)
	ch := mustApply(t, v, api.SyncResponse{Seq: 2, Reset: true, Fences: []api.Fence{fence(0, 5), fence(1, 3)}}, t0)
	s := v.Snapshot()
	want := Snapshot{Seq: 2, Fences: []api.Fence{fence(0, 5), fence(1, 3)}, Kids: s.Kids}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("after reset %+v\nwant %+v", s, want)
	}
	if len(s.Kids) != 1 || ch.KeysChanged {
		t.Fatalf("a snapshot without keys must keep them: kids %v, changes %+v", s.Kids, ch)
	}
	if !reflect.DeepEqual(ch.Raised, []api.Fence{fence(0, 5)}) || !ch.Reset || !ch.Revoked {
		t.Fatalf("changes %+v: want fence 0 raised, reset, revoked", ch)
	}
	ch = mustApply(t, v, api.SyncResponse{Seq: 3, Reset: true, Keys: []api.JWK{testJWK(t, 2)}}, t0)
	if s := v.Snapshot(); !ch.KeysChanged || len(s.Kids) != 1 || s.Kids[0] != testJWK(t, 2).Kid {
		t.Fatalf("snapshot keys not replaced: %v", s.Kids)
	}
}

func TestApplyBadKeyChangesNothing(t *testing.T) {
	v := newView()
	mustApply(t, v, fullUpdate(t, 1), t0)
	before := v.Snapshot()
	bad := testJWK(t, 5)
	bad.Crv = "P-256"
	_, err := v.Apply(api.SyncResponse{Seq: 2, Reset: true, Keys: []api.JWK{bad}, Fences: []api.Fence{fence(7, 7)}}, t0)
	if err == nil || !reflect.DeepEqual(before, v.Snapshot()) {
		t.Fatalf("err %v; view changed: %v", err, !reflect.DeepEqual(before, v.Snapshot()))
	}
}

func TestKeysDelta(t *testing.T) {
	v := newView()
	mustApply(t, v, api.SyncResponse{Seq: 1, Keys: []api.JWK{testJWK(t, 1), testJWK(t, 2)}}, t0)
	ch := mustApply(t, v, api.SyncResponse{Seq: 2, Fences: []api.Fence{fence(0, 1)}}, t0)
	if ch.KeysChanged || len(v.Keys()) != 2 {
		t.Fatal("a delta without keys changed them")
	}
	ch = mustApply(t, v, api.SyncResponse{Seq: 3, Keys: []api.JWK{testJWK(t, 2)}}, t0)
	keys := v.Keys()
	if _, ok := keys[testJWK(t, 2).Kid]; !ch.KeysChanged || len(keys) != 1 || !ok {
		t.Fatalf("keys %v after replacement", keys)
	}
}

func TestPruneWithInjectedClock(t *testing.T) {
	v := newView()
	mustApply(t, v, api.SyncResponse{
		Seq:            1,
		Denied:         []api.Denied{{JTI: jti(1), Exp: t0.Unix() + 10}, {JTI: jti(2), Exp: t0.Unix() + 100}},
		RevokedMembers: []api.RevokedMember{{Group: "billing", MemberID: "member-1", Until: t0.Unix() + 10}},
		QoS:            []api.QoSOverride{{ID: "a", Selector: api.QoSSelector{Topic: "orders"}, Monitor: "x", Until: t0.Unix() + 10}},
	}, t0)
	c := capability()
	c.Epoch, c.ExpiresAt = 0, ocap.Seconds(t0.Unix()+10)
	at := func(s int64) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	v.Prune(at(11)) // inside exp + leeway: kept
	s := v.Snapshot()
	if len(s.Denied) != 2 || len(s.RevokedMembers) != 1 || len(s.QoS) != 0 {
		t.Fatalf("at +11s: %+v", s)
	}
	if got := Decide(c, fetchReq(0), v, at(11)); got != Denied {
		t.Fatalf("denied capability inside leeway: %v", got)
	}
	if q := v.QoS(c, at(10)); q.Monitor != "" {
		t.Fatalf("expired override still applies: %+v", q)
	}
	v.Prune(at(12))
	s = v.Snapshot()
	if len(s.Denied) != 1 || s.Denied[0].JTI != jti(2) || len(s.RevokedMembers) != 0 {
		t.Fatalf("at +12s: %+v", s)
	}
	if got := Decide(c, fetchReq(0), v, at(12)); got != Expired {
		t.Fatalf("after pruning the capability must be expired, got %v", got)
	}
	mustApply(t, v, api.SyncResponse{Seq: 2}, at(100))
	if s := v.Snapshot(); len(s.Denied) != 1 {
		t.Fatalf("Apply at +100s pruned early: %+v", s)
	}
	mustApply(t, v, api.SyncResponse{Seq: 3}, at(102))
	if s := v.Snapshot(); len(s.Denied) != 0 {
		t.Fatalf("Apply at +102s did not prune: %+v", s)
	}
}

func TestQoSOverrides(t *testing.T) {
	v := newView()
	c := capability()
	c.QoS = &ocap.QoS{LogLevel: "info", Monitor: "claim", MaxBytesPerSec: 1000}
	until := t0.Unix() + 60
	mustApply(t, v, api.SyncResponse{Seq: 1, QoS: []api.QoSOverride{
		{ID: "topic", Selector: api.QoSSelector{Topic: "orders"}, Monitor: "by-topic", MaxBytesPerSec: 50, Until: until},
		{ID: "holder", Selector: api.QoSSelector{Holder: "member-1"}, LogLevel: "debug", Until: until},
		{ID: "partition", Selector: api.QoSSelector{Topic: "orders", Partition: part(3)}, MaxBytesPerSec: 70, Until: until},
		{ID: "other-partition", Selector: api.QoSSelector{Topic: "orders", Partition: part(4)}, MaxBytesPerSec: 1, Until: until},
		{ID: "empty", Selector: api.QoSSelector{}, Monitor: "never", Until: until},
		{ID: "ancestor", Selector: api.QoSSelector{JTI: jti(40)}, Monitor: "by-ancestor", Until: until},
	}}, t0)
	got := v.QoS(c, t0)
	if want := (ocap.QoS{LogLevel: "debug", Monitor: "by-topic", MaxBytesPerSec: 70}); got != want {
		t.Fatalf("QoS %+v, want %+v", got, want)
	}
	c.Chain = []string{jti(40)}
	if got := v.QoS(c, t0); got.Monitor != "by-ancestor" {
		t.Fatalf("jti selector did not match the chain: %+v", got)
	}
	mustApply(t, v, api.SyncResponse{Seq: 2, QoS: []api.QoSOverride{{ID: "holder", Selector: api.QoSSelector{Holder: "member-1"}, LogLevel: "error", Until: until}}}, t0)
	if got := v.QoS(c, t0); got.LogLevel != "error" {
		t.Fatalf("override with the same ID did not replace: %+v", got)
	}
}

// A delta of more new fences than the view holds (a member's bulk
// revoke: the view makes room for them at once, revocation.Set.Grow)
// raises every one of them and keeps every fence held before.
func TestBulkDeltaKeepsFences(t *testing.T) {
	v := newView()
	mustApply(t, v, api.SyncResponse{Seq: 1, Reset: true, Fences: []api.Fence{fence(0, 3), fence(1, 5)}}, t0)
	bulk := api.SyncResponse{Seq: 2}
	for p := range int32(5_000) {
		bulk.Fences = append(bulk.Fences, api.Fence{Group: "bulk-g", Topic: "bulk", Partition: p, Epoch: 2})
	}
	ch := mustApply(t, v, bulk, t0)
	if len(ch.Raised) != 5_000 {
		t.Fatalf("raised %d, want 5,000", len(ch.Raised))
	}
	if v.Fence("billing", "orders", 0) != 3 || v.Fence("billing", "orders", 1) != 5 || v.Fence("bulk-g", "bulk", 4_999) != 2 {
		t.Fatalf("fences after the bulk: %d %d %d", v.Fence("billing", "orders", 0), v.Fence("billing", "orders", 1), v.Fence("bulk-g", "bulk", 4_999))
	}
	c := capability() // billing/orders/3 at epoch 5: unfenced
	c.Partition = part(1)
	c.Epoch = 4
	if r := Decide(c, fetchReq(0), v, t0); r == Allow {
		t.Fatal("epoch 4 under fence 5 allowed after the bulk delta")
	}
}
