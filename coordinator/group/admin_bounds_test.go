package group_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/group"
)

// mustRefuseLimit checks that ref was refused with limit_exceeded naming
// limits.<limit> and its value, and that the refusal changed nothing the
// machine persists or sends to gateways (no record, no sync entry).
func (w *world) mustRefuseLimit(ref group.Ref, limit string, max int, writes int, seq uint64) {
	w.t.Helper()
	r, ok := w.replies[ref].(group.Rejected)
	if !ok || r.Code != api.CodeLimitExceeded || r.Details["limit"] != "coordinator.groups.limits."+limit || r.Details["max"] != int64(max) {
		w.t.Fatalf("reply %#v, want limit_exceeded naming limits.%s = %d", w.replies[ref], limit, max)
	}
	if w.store.writes != writes || w.m.SyncSeq() != seq {
		w.t.Fatalf("refused request persisted %d records, sync seq %d → %d", w.store.writes-writes, seq, w.m.SyncSeq())
	}
}

func (w *world) putQoS(id string, ttl time.Duration, level string) group.Ref {
	ref := w.nextRef()
	w.step(group.PutQoS{Ref: ref, Override: api.QoSOverride{ID: id, Selector: api.QoSSelector{Group: id},
		LogLevel: level, Until: w.now.Add(ttl).Unix()}})
	return ref
}

func (w *world) deny(jti string, exp time.Time) group.Ref {
	ref := w.nextRef()
	w.step(group.DenyJTI{Ref: ref, JTI: jti, Expires: exp})
	return ref
}

// TestQoSOverridesBounded: the attack is an admin script adding
// overrides under new ids without end. Past limits.qos_overrides a new
// id is refused and nothing changes; a known id still merges; an
// override that expired gives its place back.
func TestQoSOverridesBounded(t *testing.T) {
	w := newWorld(t, func(c *group.Config) { c.Limits.QoSOverrides = 2 })
	mustReply[group.QoSReply](t, w, w.putQoS("q1", time.Minute, "debug"))
	mustReply[group.QoSReply](t, w, w.putQoS("q2", time.Hour, "debug"))
	writes, seq := w.store.writes, w.m.SyncSeq()
	w.mustRefuseLimit(w.putQoS("q3", time.Hour, "debug"), "qos_overrides", 2, writes, seq)
	if got := w.m.QoS(); len(got) != 2 || len(w.store.qos) != 2 {
		t.Fatalf("overrides after the refusal: %+v (stored %d)", got, len(w.store.qos))
	}
	if r := mustReply[group.QoSReply](t, w, w.putQoS("q2", time.Hour, "warn")); r.Override.LogLevel != "warn" {
		t.Fatalf("known override not updated: %+v", r.Override)
	}
	w.advance(time.Minute + time.Second) // q1 expires
	mustReply[group.QoSReply](t, w, w.putQoS("q3", time.Hour, "debug"))
}

// TestDeniedBounded: past limits.denied a new token id is refused and
// nothing changes — not even the members the credential opened are
// revoked (nothing half-applied); denying a known id again (a later
// exp) and a deny that adds nothing (its exp lapsed everywhere) pass;
// ids are pruned once their tokens expired everywhere, giving places
// back.
func TestDeniedBounded(t *testing.T) {
	w := newWorld(t, func(c *group.Config) { c.Limits.Denied = 2 })
	w.topics(map[string]int32{"t": 2})
	w.pollUntilParked("gw1")
	member := w.joinAs(credA, group.Join{Group: "g"}).(group.JoinReply).MemberID
	w.settle("g")
	mustReply[group.Done](t, w, w.deny("jti-1", w.now.Add(time.Minute)))
	mustReply[group.Done](t, w, w.deny("jti-2", w.now.Add(time.Hour)))
	writes, seq := w.store.writes, w.m.SyncSeq()
	w.mustRefuseLimit(w.deny(credA.ID, w.now.Add(time.Hour)), "denied", 2, writes, seq)
	if !w.isMember("g", member) || len(w.store.denied) != 2 {
		t.Fatalf("refused deny: member kept %t, stored denied %d", w.isMember("g", member), len(w.store.denied))
	}
	mustReply[group.Done](t, w, w.deny("jti-2", w.now.Add(2*time.Hour)))                             // known: a later exp
	mustReply[group.Done](t, w, w.deny("jti-9", w.now.Add(-time.Hour)))                              // lapsed: adds nothing
	w.advance(time.Minute + w.cfg.Leeway + w.cfg.MaxClockSkew + w.cfg.RenewTokenGrace + time.Second) // jti-1 pruned (kept renew_token_grace past its lapse)
	if _, ok := w.store.denied["jti-1"]; ok {
		t.Fatal("jti-1 still stored after its token expired everywhere")
	}
	mustReply[group.Done](t, w, w.deny(credA.ID, w.now.Add(time.Hour)))
	if w.isMember("g", member) {
		t.Fatal("the deny that got a place did not revoke the credential's member")
	}
}

// TestAdminGroupConfigBounded: a group config naming a new group creates
// it with non-default settings (never reaped), so limits.groups bounds it
// as it bounds joins; known groups are always configurable.
func TestAdminGroupConfigBounded(t *testing.T) {
	w := newWorld(t, func(c *group.Config) { c.Limits.Groups = 2 })
	moves := 5
	configure := func(name string) group.Ref {
		ref := w.nextRef()
		w.step(group.SetGroupConfig{Ref: ref, Group: name, MaxMovesPerSecond: &moves})
		return ref
	}
	mustReply[group.GroupConfigReply](t, w, configure("a"))
	mustReply[group.GroupConfigReply](t, w, configure("b"))
	writes, seq := w.store.writes, w.m.SyncSeq()
	w.mustRefuseLimit(configure("c"), "groups", 2, writes, seq)
	if names := w.m.Groups(); len(names) != 2 {
		t.Fatalf("groups after the refusal: %v", names)
	}
	moves = 7
	mustReply[group.GroupConfigReply](t, w, configure("a"))
}

// TestDenyJTIsAllOrNone: an OAuth client's revoke denies every
// credential it obtained in one DenyJTIs. Denied one by one, a deny
// refused at limits.denied midway left the later credentials' members
// live; here either every id fits and all are denied (their members
// revoked) in one Ready, or none is: limit_exceeded naming the setting,
// no record, no sync entry, no member revoked.
func TestDenyJTIsAllOrNone(t *testing.T) {
	w := newWorld(t, func(c *group.Config) { c.Limits.Denied = 3 })
	w.topics(map[string]int32{"t": 2})
	w.pollUntilParked("gw1")
	credC := group.Credential{ID: "jti-c", Issuer: "capgate", Subject: "svc-c"}
	var members []string
	for _, cred := range []group.Credential{credA, credB, credC} {
		members = append(members, w.joinAs(cred, group.Join{Group: "g"}).(group.JoinReply).MemberID)
	}
	w.settle("g")
	mustReply[group.Done](t, w, w.deny("jti-0", w.now.Add(time.Hour)))
	all := func(creds ...group.Credential) group.Ref {
		ref := w.nextRef()
		var ds []group.Denial
		for _, c := range creds {
			ds = append(ds, group.Denial{JTI: c.ID, Expires: w.now.Add(time.Hour)})
		}
		w.step(group.DenyJTIs{Ref: ref, Denials: ds})
		return ref
	}
	writes, seq := w.store.writes, w.m.SyncSeq()
	w.mustRefuseLimit(all(credA, credB, credC), "denied", 3, writes, seq)
	for _, id := range members {
		if !w.isMember("g", id) {
			t.Fatalf("refused multi-id deny revoked member %s", id)
		}
	}
	if len(w.store.denied) != 1 {
		t.Fatalf("refused multi-id deny stored %d denied ids, want only jti-0", len(w.store.denied))
	}
	mustReply[group.Done](t, w, all(credA, credB, credA)) // an id twice counts once
	if w.isMember("g", members[0]) || w.isMember("g", members[1]) || !w.isMember("g", members[2]) {
		t.Fatalf("after denying A and B: members %v live %t %t %t", members,
			w.isMember("g", members[0]), w.isMember("g", members[1]), w.isMember("g", members[2]))
	}
	if len(w.store.denied) != 3 {
		t.Fatalf("stored denied ids %d, want 3", len(w.store.denied))
	}
}

// TestDenyExpCappedAtTheLongestTokenLifetime: a deny whose exp lies past
// now + token_ttl_max (here a century away, as an OAuth revoke or any
// caller but the admin handler, which refuses it, could pass) is held
// only until now + token_ttl_max — no token it can match lives longer —
// by the machine, the store and the sync log alike. Before, the entry
// was kept for the century.
func TestDenyExpCappedAtTheLongestTokenLifetime(t *testing.T) {
	w := newWorld(t, func(c *group.Config) { c.TokenTTLMax = time.Hour })
	w.pollUntilParked("gw1")
	bound := w.now.Add(time.Hour).Unix()
	ref := w.nextRef()
	w.step(group.DenyJTIs{Ref: ref, Denials: []group.Denial{
		{JTI: "far", Expires: w.now.Add(100 * 365 * 24 * time.Hour)},
		{JTI: "near", Expires: w.now.Add(time.Minute)},
	}})
	mustReply[group.Done](t, w, ref)
	if exp := w.store.denied["far"].Exp; exp != bound {
		t.Fatalf("stored exp of a century-long deny: %d, want now + token_ttl_max = %d", exp, bound)
	}
	if exp := w.store.denied["near"].Exp; exp != w.now.Add(time.Minute).Unix() {
		t.Fatalf("a deny within the bound was changed: %d", exp)
	}
	for _, sent := range [][]api.Denied{lastSync(w, "gw1").Denied, w.resetSnapshot("fresh").Denied} {
		if i := slices.IndexFunc(sent, func(d api.Denied) bool { return d.JTI == "far" }); i < 0 || sent[i].Exp != bound {
			t.Fatalf("the gateways are sent %+v, want far until %d", sent, bound)
		}
	}
	w.advance(time.Hour + w.cfg.Leeway + w.cfg.MaxClockSkew + w.cfg.RenewTokenGrace + time.Second) // kept renew_token_grace past its lapse
	if _, ok := w.store.denied["far"]; ok {
		t.Fatal("the capped deny is still stored after every token it can match expired everywhere")
	}
}

// TestQoSTTLBounded: an override asking to stay past
// limits.qos_ttl_max is refused with 400 naming it, and nothing is
// stored or sent; one at the limit passes. Before, any ttl was taken.
func TestQoSTTLBounded(t *testing.T) {
	w := newWorld(t, func(c *group.Config) { c.Limits.QoSTTLMax = time.Hour })
	writes, seq := w.store.writes, w.m.SyncSeq()
	ref := w.putQoS("q1", time.Hour+time.Second, "debug")
	r, ok := w.replies[ref].(group.Rejected)
	if !ok || r.Code != api.CodeBadRequest || !strings.Contains(r.Message, "groups.limits.qos_ttl_max") {
		t.Fatalf("reply %#v, want bad_request naming groups.limits.qos_ttl_max", w.replies[ref])
	}
	if w.store.writes != writes || w.m.SyncSeq() != seq || len(w.m.QoS()) != 0 {
		t.Fatalf("the refused override changed state: %d writes, seq %d → %d, %d overrides", w.store.writes-writes, seq, w.m.SyncSeq(), len(w.m.QoS()))
	}
	mustReply[group.QoSReply](t, w, w.putQoS("q1", time.Hour, "debug"))
}
