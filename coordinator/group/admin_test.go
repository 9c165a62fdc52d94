package group_test

import (
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/assign"
	"github.com/capgate/capgate/coordinator/group"
)

// oneMember: topic t with 2 partitions owned by member a, gateway gw1 in
// sync and a held heartbeat.
func oneMember(t *testing.T, mutate ...func(*group.Config)) (*world, string) {
	t.Helper()
	w := newWorld(t, mutate...)
	w.topics(map[string]int32{"t": 2})
	w.pollUntilParked("gw1")
	a := w.join("g", "a", "t")
	w.heartbeat(a)
	return w, a
}

// An admin revoke fences the partition and answers once every gateway is
// safe; the partition is then reassigned under a new epoch.
func TestAdminRevoke(t *testing.T) {
	w, a := oneMember(t)
	e := w.partition("g", "t", 0).Epoch
	ref := w.nextRef()
	w.step(group.RevokePartition{Ref: ref, Group: "g", Topic: "t", Partition: 0, Reason: "leaked token"})
	if _, ok := w.replies[ref]; ok {
		t.Fatal("admin revoke answered before the gateway acked")
	}
	if r := revokesFor(w.sent, a); len(r) != 1 || r[0].Epoch != e {
		t.Fatalf("revokes %v", r)
	}
	w.pollUntilParked("gw1")
	if r := mustReply[group.RevokeReply](t, w, ref); r.Epoch != e+1 {
		t.Fatalf("reply %+v, want epoch %d", r, e+1)
	}
	w.heartbeat(a)
	w.release(a, 9)
	if p := w.partition("g", "t", 0); p.State != group.Owned || p.Owner != a || p.Epoch != e+1 {
		t.Fatalf("after revoke: %+v, want a at epoch %d", p, e+1)
	}
	if other := w.partition("g", "t", 1); other.Epoch != 1 {
		t.Fatalf("other partition touched: %+v", other)
	}
	// Revoking an unowned or unknown partition.
	ref = w.nextRef()
	w.step(group.RevokePartition{Ref: ref, Group: "g", Topic: "t", Partition: 7})
	mustReject(t, w, ref, api.CodeNotFound)
}

// A lease to a member moves the partition to it through the handoff and
// pins it there; when the lease ends the pin goes.
func TestLeaseToMember(t *testing.T) {
	w, a := oneMember(t, longSessions)
	b := w.join("g", "b", "t")
	w.heartbeat(b)
	w.settle("g")
	p := w.owners("g")
	var fromA int32 = 0
	if p[partitionID("t", 0)] != a {
		fromA = 1
	}
	ref := w.nextRef()
	w.step(group.Lease{Ref: ref, Group: "g", Topic: "t", Partition: fromA, Holder: b, TTL: time.Minute})
	if _, ok := w.replies[ref]; ok {
		t.Fatal("lease answered before the grant")
	}
	w.settle("g")
	r := mustReply[group.LeaseReply](t, w, ref)
	if r.Grant.Holder != b || r.Grant.Outside || r.Grant.Partition != fromA || !r.Until.Equal(w.now.Add(time.Minute)) {
		t.Fatalf("lease reply %+v", r)
	}
	if w.owners("g")[partitionID("t", fromA)] != b {
		t.Fatalf("pinned partition not on b: %v", w.owners("g"))
	}
	// A third member joining does not take the pinned partition.
	c := w.join("g", "c", "t")
	w.settle("g")
	if w.owners("g")[partitionID("t", fromA)] != b {
		t.Fatalf("pinned partition moved: %v", w.owners("g"))
	}
	w.keepAliveUntil(w.now.Add(time.Minute), a, b, c)
	if got := w.partition("g", "t", fromA); got.LeaseHolder != "" {
		t.Fatalf("lease still there after ttl: %+v", got)
	}
	if len(w.store.leases) != 0 {
		t.Fatalf("lease still persisted: %v", w.store.leases)
	}
}

// A lease to an outside holder hands it the capability in the reply, takes
// the partition out of the assignment, and gives it back when it ends.
func TestLeaseToOutsideHolder(t *testing.T) {
	w, a := oneMember(t, longSessions)
	e := w.partition("g", "t", 1).Epoch
	ref := w.nextRef()
	w.step(group.Lease{Ref: ref, Group: "g", Topic: "t", Partition: 1, Holder: "backfill-job", TTL: 2 * time.Minute})
	w.pollUntilParked("gw1")
	w.release(a, 77)
	r := mustReply[group.LeaseReply](t, w, ref)
	g := r.Grant
	if g.Holder != "backfill-job" || !g.Outside || g.Epoch != e+1 || g.Offset != 77 || g.ExpiresAt.After(r.Until) {
		t.Fatalf("outside grant %+v until %s", g, r.Until)
	}
	if p := w.partition("g", "t", 1); p.Owner != "backfill-job" || !p.OwnerOutside {
		t.Fatalf("partition %+v", p)
	}
	// Members coming and going leave it alone.
	b := w.join("g", "b", "t")
	w.settle("g")
	if p := w.partition("g", "t", 1); p.Owner != "backfill-job" {
		t.Fatalf("outside lease disturbed: %+v", p)
	}
	// Leasing again to the same holder extends it and re-sends the grant.
	ref = w.nextRef()
	w.step(group.Lease{Ref: ref, Group: "g", Topic: "t", Partition: 1, Holder: "backfill-job", TTL: 3 * time.Minute})
	if again := mustReply[group.LeaseReply](t, w, ref); again.Grant.Epoch != g.Epoch {
		t.Fatalf("extension changed the epoch: %+v", again)
	}
	// Leasing it to another holder is a conflict naming the holder
	// (newuser4 #6: it silently fenced backfill-job's lease), the
	// partition untouched; with force the lease moves.
	ref = w.nextRef()
	w.step(group.Lease{Ref: ref, Group: "g", Topic: "t", Partition: 1, Holder: "other-job", TTL: time.Minute})
	mustReject(t, w, ref, api.CodeConflict)
	if d, _ := w.replies[ref].(group.Rejected).Details["lease"].(map[string]any); d["holder"] != "backfill-job" {
		t.Fatalf("the conflict's details %v, want the lease's holder", w.replies[ref].(group.Rejected).Details)
	}
	if p := w.partition("g", "t", 1); p.Owner != "backfill-job" || p.Epoch != g.Epoch {
		t.Fatalf("a refused lease moved the partition: %+v", p)
	}
	ref = w.nextRef()
	w.step(group.Lease{Ref: ref, Group: "g", Topic: "t", Partition: 1, Holder: "other-job", TTL: 3 * time.Minute, Force: true})
	w.pollUntilParked("gw1")
	if moved := mustReply[group.LeaseReply](t, w, ref); moved.Grant.Holder != "other-job" || moved.Grant.Epoch <= g.Epoch {
		t.Fatalf("forced lease: %+v", moved)
	}
	w.keepAliveUntil(w.now.Add(3*time.Minute+time.Second), a, b)
	p := w.partition("g", "t", 1)
	if p.State != group.Owned || p.OwnerOutside || p.Epoch <= g.Epoch {
		t.Fatalf("after the lease ended: %+v", p)
	}
}

func partitionID(topic string, p int32) assign.Partition {
	return assign.Partition{Topic: topic, Partition: p}
}

// Denied jtis, revoked members and QoS overrides travel on the sync log,
// appear in reset snapshots, and are pruned once expired everywhere.
func TestDenyJTIAndQoS(t *testing.T) {
	w, _ := oneMember(t)
	exp := w.now.Add(30 * time.Second)
	ref := w.nextRef()
	w.step(group.DenyJTI{Ref: ref, JTI: "jti-1", Expires: exp})
	mustReply[group.Done](t, w, ref)
	denied := lastSync(w, "gw1").Denied
	w.pollUntilParked("gw1")
	part := int32(1)
	qos := api.QoSOverride{ID: "slow", Selector: api.QoSSelector{Group: "g", Partition: &part}, LogLevel: "debug",
		MaxBytesPerSec: 1000, Until: w.now.Add(10 * time.Second).Unix()}
	ref = w.nextRef()
	w.step(group.PutQoS{Ref: ref, Override: qos})
	mustReply[group.QoSReply](t, w, ref)
	sync := lastSync(w, "gw1")
	if len(denied) != 1 || denied[0].Exp != exp.Unix() || len(sync.QoS) != 1 || sync.QoS[0].MaxBytesPerSec != 1000 {
		t.Fatalf("sync deltas: %+v then %+v", denied, sync)
	}
	reset := w.resetSnapshot("fresh")
	if len(reset.Denied) != 1 || len(reset.QoS) != 1 || len(reset.Fences) != 2 || !reset.KeysChanged {
		t.Fatalf("reset snapshot %+v", reset)
	}
	ref = w.nextRef()
	w.step(group.PutQoS{Ref: ref, Override: api.QoSOverride{ID: "x"}})
	mustReject(t, w, ref, api.CodeBadRequest)

	w.advanceTo(time.Unix(qos.Until, 0))
	if len(w.store.qos) != 0 || len(w.resetSnapshot("fresh2").QoS) != 0 {
		t.Fatal("expired QoS override not pruned")
	}
	// Kept renew_token_grace past its lapse (revocation.Rule.Retain): a
	// renewal that far past its member token's expiry is checked by it.
	gone := exp.Add(w.cfg.Leeway + w.cfg.MaxClockSkew + w.cfg.RenewTokenGrace)
	w.advanceTo(gone.Add(-time.Millisecond))
	if len(w.store.denied) != 1 {
		t.Fatal("denied jti pruned before exp+leeway+skew+renew_token_grace")
	}
	w.advanceTo(gone)
	if len(w.store.denied) != 0 || len(w.resetSnapshot("fresh3").Denied) != 0 {
		t.Fatal("denied jti not pruned")
	}
}

func lastSync(w *world, gatewayID string) group.SyncReply {
	for i := len(w.sent) - 1; i >= 0; i-- {
		if r, ok := w.sent[i].(group.SyncReply); ok && r.Gateway == gatewayID {
			return r
		}
	}
	w.t.Fatalf("no sync reply for %s", gatewayID)
	return group.SyncReply{}
}

// resetSnapshot polls as a new gateway and returns its reset reply.
func (w *world) resetSnapshot(id string) group.SyncReply {
	w.t.Helper()
	ref := w.nextRef()
	w.step(group.SyncPoll{Ref: ref, Gateway: id})
	r := mustReply[group.SyncReply](w.t, w, ref)
	if !r.Reset {
		w.t.Fatalf("poll after=0 got %+v", r)
	}
	w.stuck[id] = true
	return r
}

// Revoking a member fences all its partitions, denies it on the gateways
// until its capabilities expire, and removes it without waiting. Its
// held heartbeat is answered unknown_member saying it was revoked
// (api.DetailRemoved); a member that leaves is not said to be.
func TestRevokeMember(t *testing.T) {
	w, a := oneMember(t)
	b := w.join("g", "b", "t")
	w.heartbeat(b)
	w.settle("g")
	exp := w.clients[a].held[partitionIDFor(w, a)].ExpiresAt
	held := w.nextRef()
	w.step(group.Heartbeat{Ref: held, Group: "g", MemberID: a, Wait: time.Minute})
	if r, ok := w.replies[held]; ok {
		t.Fatalf("a settled member's heartbeat answered at once: %v", r)
	}
	ref := w.nextRef()
	w.step(group.RevokeMember{Ref: ref, Group: "g", MemberID: a})
	r := mustReply[group.RevokeMemberReply](t, w, ref)
	if r.Fenced != 1 || r.Until.Before(exp) {
		t.Fatalf("reply %+v, capability expires %s", r, exp)
	}
	mustReject(t, w, held, api.CodeUnknownMember)
	if d := w.replies[held].(group.Rejected).Details; d[api.DetailRemoved] != api.RemovedRevoked {
		t.Fatalf("the held heartbeat's answer has details %v, want %s: %s", d, api.DetailRemoved, api.RemovedRevoked)
	}
	if w.isMember("g", a) {
		t.Fatal("revoked member still in the group")
	}
	sync := lastSync(w, "gw1")
	if len(sync.RevokedMembers) != 1 || sync.RevokedMembers[0].MemberID != a || len(sync.Fences) != 1 {
		t.Fatalf("sync %+v", sync)
	}
	w.pollUntilParked("gw1")
	if w.ownedBy("g", b) != 2 {
		t.Fatalf("after revoke: %v", w.owners("g"))
	}
	ref = w.nextRef()
	w.step(group.RevokeMember{Ref: ref, Group: "g", MemberID: a})
	if again := mustReply[group.RevokeMemberReply](t, w, ref); !again.AlreadyRevoked || again.Fenced != 0 || !again.Until.Equal(r.Until) {
		t.Fatalf("the revoke repeated: %+v, want already revoked until %s, nothing fenced", again, r.Until)
	}
	if len(w.store.revoked) != 1 {
		t.Fatal("revoked member not persisted")
	}

	held = w.nextRef()
	w.step(group.Heartbeat{Ref: held, Group: "g", MemberID: b, Wait: time.Minute})
	w.step(group.Leave{Ref: w.nextRef(), Group: "g", MemberID: b})
	mustReject(t, w, held, api.CodeUnknownMember)
	if d := w.replies[held].(group.Rejected).Details; d != nil {
		t.Fatalf("a member that left: its held heartbeat's answer has details %v", d)
	}
}

func partitionIDFor(w *world, member string) assign.Partition {
	for p := range w.clients[member].held {
		return p
	}
	w.t.Fatalf("%s holds nothing", member)
	return assign.Partition{}
}

func TestGroupConfig(t *testing.T) {
	w, a := oneMember(t)
	bad := -1
	ref := w.nextRef()
	w.step(group.SetGroupConfig{Ref: ref, Group: "g", MaxMovesPerSecond: &bad})
	mustReject(t, w, ref, api.CodeBadRequest)
	latest, short := "latest", time.Second
	ref = w.nextRef()
	w.step(group.SetGroupConfig{Ref: ref, Group: "g", OffsetReset: &latest, HandoffTimeout: &short})
	if c := mustReply[group.GroupConfigReply](t, w, ref).Config; c.OffsetReset != "latest" || c.HandoffTimeout != time.Second {
		t.Fatalf("config %+v", c)
	}
	if w.store.groups["g"].Config.HandoffTimeout != time.Second {
		t.Fatal("group config not persisted")
	}
	rangeName := "range"
	ref = w.nextRef()
	w.step(group.SetGroupConfig{Ref: ref, Group: "g", Assignor: &rangeName})
	mustReject(t, w, ref, api.CodeInconsistentAssign)
	// The new handoff timeout applies; nothing committed → latest.
	b := w.join("g", "b", "t")
	w.pollUntilParked("gw1")
	w.advance(time.Second)
	p := w.partition("g", "t", 1)
	if p.Owner != b {
		t.Fatalf("handoff_timeout 1s not applied: %+v", p)
	}
	w.heartbeat(b)
	if g := grantsFor(w.sent, b); len(g) != 1 || g[0].Offset != group.OffsetLatest {
		t.Fatalf("grant %+v, want offset_reset latest", g)
	}
	_ = a
}

// An admin offset reset moves the offset back, cuts off the holder and
// restarts the partition from there.
func TestResetOffset(t *testing.T) {
	w, a := oneMember(t)
	e := w.partition("g", "t", 0).Epoch
	w.commit(a, "t", 0, e, 500, false)
	ref := w.nextRef()
	w.step(group.ResetOffset{Ref: ref, Group: "g", Topic: "t", Partition: 0, Offset: 100})
	if r := mustReply[group.ResetOffsetReply](t, w, ref); r.LeaseEnded != nil {
		t.Fatalf("a reset of a member's partition ended a lease: %+v", r.LeaseEnded)
	}
	if msg := w.commit(a, "t", 0, e, 600, false); msg.(group.Rejected).Code != api.CodeStaleEpoch {
		t.Fatalf("holder's commit after reset: %#v", msg)
	}
	w.pollUntilParked("gw1")
	w.heartbeat(a)
	p := w.partition("g", "t", 0)
	if p.Committed != 100 || p.State != group.Owned || p.Epoch != e+1 {
		t.Fatalf("after reset: %+v", p)
	}
	g := grantsFor(w.sent, a)
	if last := g[len(g)-1]; last.Epoch != e+1 || last.Offset != 100 {
		t.Fatalf("grant after reset %+v", last)
	}
}

// Admin actions on a group that does not exist are refused with 404 and
// leave no group behind: a lease, a revoke or an offset reset never
// creates one.
func TestAdminActionsOnUnknownGroup(t *testing.T) {
	w, _ := oneMember(t)
	for _, ev := range []func(group.Ref) group.Event{
		func(r group.Ref) group.Event {
			return group.Lease{Ref: r, Group: "nope", Topic: "t", Partition: 0, Holder: "x", TTL: time.Minute}
		},
		func(r group.Ref) group.Event {
			return group.RevokePartition{Ref: r, Group: "nope", Topic: "t", Partition: 0}
		},
		func(r group.Ref) group.Event {
			return group.ResetOffset{Ref: r, Group: "nope", Topic: "t", Partition: 0, Offset: 1}
		},
	} {
		ref := w.nextRef()
		w.step(ev(ref))
		mustReject(t, w, ref, api.CodeNotFound)
	}
	if names, _ := w.m.GroupsPage("", 100); len(names) != 1 || names[0] != "g" {
		t.Fatalf("groups after admin actions on an unknown group: %v", names)
	}
}

// A lease longer than limits.lease_ttl_max is refused with 400; one at
// the limit is granted.
func TestLeaseTTLCapped(t *testing.T) {
	w, _ := oneMember(t, longSessions, func(c *group.Config) { c.Limits.LeaseTTLMax = time.Hour })
	ref := w.nextRef()
	w.step(group.Lease{Ref: ref, Group: "g", Topic: "t", Partition: 1, Holder: "job", TTL: 10_000_000_000 * time.Millisecond})
	mustReject(t, w, ref, api.CodeBadRequest)
	if r := w.replies[ref].(group.Rejected); !strings.Contains(r.Message, "lease_ttl_max") {
		t.Fatalf("refusal %+v does not name the limit", r)
	}
	if p := w.partition("g", "t", 1); p.LeaseHolder != "" {
		t.Fatalf("refused lease pinned the partition: %+v", p)
	}
	ref = w.nextRef()
	w.step(group.Lease{Ref: ref, Group: "g", Topic: "t", Partition: 1, Holder: "job", TTL: time.Hour})
	if p := w.partition("g", "t", 1); p.LeaseHolder != "job" {
		t.Fatalf("lease at the limit not taken: %+v", p)
	}
}

// A second override of the same id merges into the first: the fields it
// sets replace, the others stay.
func TestQoSOverridesMerge(t *testing.T) {
	w, _ := oneMember(t)
	until := w.now.Add(time.Minute).Unix()
	put := func(o api.QoSOverride, keep group.QoSKeep) api.QoSOverride {
		t.Helper()
		ref := w.nextRef()
		w.step(group.PutQoS{Ref: ref, Override: o, Keep: keep})
		return mustReply[group.QoSReply](t, w, ref).Override
	}
	sel := api.QoSSelector{Group: "g"}
	put(api.QoSOverride{ID: "q", Selector: sel, LogLevel: "debug", Until: until}, group.QoSKeep{Monitor: true, MaxBytesPerSec: true})
	got := put(api.QoSOverride{ID: "q", Selector: sel, MaxBytesPerSec: 4000, Until: until + 60}, group.QoSKeep{LogLevel: true, Monitor: true})
	if got.LogLevel != "debug" || got.MaxBytesPerSec != 4000 || got.Until != until+60 {
		t.Fatalf("merged override %+v: want debug kept, 4000 B/s and the new ttl", got)
	}
	if list := w.m.QoS(); len(list) != 1 || list[0] != got {
		t.Fatalf("overrides in force %+v, want just %+v", list, got)
	}
	if got = put(api.QoSOverride{ID: "q", Selector: sel, Until: until}, group.QoSKeep{LogLevel: true, Monitor: true}); got.MaxBytesPerSec != 0 || got.LogLevel != "debug" {
		t.Fatalf("explicit 0 B/s: %+v", got)
	}
}

// An outside lease holder commits with its lease capability's epoch (no
// member token); another holder's name, an old epoch or a release are
// refused.
func TestOutsideLeaseHolderCommits(t *testing.T) {
	w, a := oneMember(t, longSessions)
	ref := w.nextRef()
	w.step(group.Lease{Ref: ref, Group: "g", Topic: "t", Partition: 1, Holder: "backfill-job", TTL: 2 * time.Minute})
	w.pollUntilParked("gw1")
	w.release(a, 10)
	g := mustReply[group.LeaseReply](t, w, ref).Grant
	commit := func(holder string, epoch uint64, offset int64, release bool) group.Message {
		ref := w.nextRef()
		w.step(group.Commit{Ref: ref, Group: "g", MemberID: holder, Outside: true, Release: release,
			Offsets: []group.CommitOffset{{Topic: "t", Partition: 1, Epoch: epoch, Offset: offset}}})
		return w.replies[ref]
	}
	if r, ok := commit("backfill-job", g.Epoch, 42, false).(group.CommitReply); !ok || len(r.Committed) != 1 || r.Committed[0].Offset != 42 {
		t.Fatalf("outside commit: %#v", r)
	}
	for _, c := range []struct {
		holder string
		epoch  uint64
		code   api.Code
	}{{"someone-else", g.Epoch, api.CodeStaleEpoch}, {"backfill-job", g.Epoch - 1, api.CodeStaleEpoch}, {a, g.Epoch, api.CodeStaleEpoch}} {
		if r, ok := commit(c.holder, c.epoch, 50, false).(group.Rejected); !ok || r.Code != c.code {
			t.Fatalf("commit by %s at epoch %d: %#v, want %s", c.holder, c.epoch, r, c.code)
		}
	}
	if r, ok := commit("backfill-job", g.Epoch, 50, true).(group.Rejected); !ok || r.Code != api.CodeBadRequest {
		t.Fatalf("outside release: %#v", r)
	}
	if offs := w.m.Offsets("g"); len(offs) != 1 || offs[0].Offset != 42 {
		t.Fatalf("offsets %+v, want t/1 at 42", offs)
	}
}

// A member revoke repeated — its first answer lost: a timeout, a 503
// saying it may have been applied, a leader killed before answering —
// is answered revoked (AlreadyRevoked, nothing done, nothing written)
// while the member's revocation runs, which is never shorter than
// capability_lease, even for a member that held nothing, and survives a
// restart. Past it, and for an id that never was a member, it is 409
// unknown_member. Before, every repeat was 409: the operator saw an
// error for what had succeeded.
func TestRepeatedMemberRevokeIsAnsweredRevoked(t *testing.T) {
	w, _ := oneMember(t)
	b := w.join("g", "b", "t")
	w.heartbeat(b)
	w.settle("g")
	idle := w.join("g", "idle", "t") // 2 partitions, 2 holders: holds nothing
	w.heartbeat(idle)
	w.settle("g")
	if w.ownedBy("g", idle) != 0 {
		t.Fatalf("the third member of two partitions holds some: %v", w.owners("g"))
	}
	ref := w.nextRef()
	w.step(group.RevokeMember{Ref: ref, Group: "g", MemberID: idle})
	first := mustReply[group.RevokeMemberReply](t, w, ref)
	if first.AlreadyRevoked || first.Fenced != 0 || first.Until.Before(w.now.Add(w.cfg.CapabilityLease)) {
		t.Fatalf("revoke of a member holding nothing: %+v, want a revocation until capability_lease (%s) from now", first, w.cfg.CapabilityLease)
	}
	repeat := func(why string) group.Message {
		t.Helper()
		writes := w.store.writes
		ref := w.nextRef()
		w.step(group.RevokeMember{Ref: ref, Group: "g", MemberID: idle})
		if w.store.writes != writes {
			t.Fatalf("%s: the repeat wrote %d records", why, w.store.writes-writes)
		}
		return w.replies[ref]
	}
	mustBeRevoked := func(why string) {
		t.Helper()
		msg := repeat(why)
		if r, ok := msg.(group.RevokeMemberReply); !ok || !r.AlreadyRevoked || r.Fenced != 0 || !r.Until.Equal(first.Until) {
			t.Fatalf("%s: the repeated revoke answered %#v, want already revoked until %s", why, msg, first.Until)
		}
	}
	mustBeRevoked("at once")
	w.advance(w.cfg.CapabilityLease - time.Second)
	mustBeRevoked("capability_lease less a second later")
	w.restart(0)
	mustBeRevoked("after a restart")
	w.advanceTo(first.Until.Add(w.cfg.Leeway + w.cfg.MaxClockSkew + time.Second))
	if msg := repeat("past the revocation"); !isRejected(msg, api.CodeUnknownMember) {
		t.Fatalf("past the revocation the repeat answered %#v, want 409 unknown_member", msg)
	}
	ref = w.nextRef()
	w.step(group.RevokeMember{Ref: ref, Group: "g", MemberID: "never-joined-0000000000000000"})
	mustReject(t, w, ref, api.CodeUnknownMember)
}

func isRejected(msg group.Message, code api.Code) bool {
	r, ok := msg.(group.Rejected)
	return ok && r.Code == code
}

// An outside lease whose ttl passes while no coordinator runs (a
// restart, a takeover: the leader down longer than the lease had left)
// ends at the restore, and the partition goes back to the group.
func TestOutsideLeaseEndingWhileDownGoesBack(t *testing.T) {
	w, a := oneMember(t, longSessions)
	ref := w.nextRef()
	w.step(group.Lease{Ref: ref, Group: "g", Topic: "t", Partition: 1, Holder: "backfill-job", TTL: 10 * time.Second})
	w.pollUntilParked("gw1")
	w.release(a, 77)
	mustReply[group.LeaseReply](t, w, ref)
	if p := w.partition("g", "t", 1); p.Owner != "backfill-job" {
		t.Fatalf("partition %+v", p)
	}
	w.restart(20 * time.Second)
	w.keepAliveUntil(w.now.Add(time.Minute), a)
	if p := w.partition("g", "t", 1); p.Owner != a || p.LeaseHolder != "" {
		t.Fatalf("a minute after a restart past the lease's end: partition %+v, want it back with %s", p, a)
	}
}
