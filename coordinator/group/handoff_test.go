package group_test

import (
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/assign"
	"github.com/capgate/capgate/coordinator/group"
)

// threeMembers builds the mailing-list starting point: two gateways in
// sync, members a, b, c owning 4 of the 12 partitions of "t" each, every
// partition with a committed offset of 100+p.
func threeMembers(t *testing.T, mutate ...func(*group.Config)) (*world, [3]string) {
	t.Helper()
	w := newWorld(t, mutate...)
	w.topics(map[string]int32{"t": 12})
	w.pollUntilParked("gw1")
	w.pollUntilParked("gw2")
	var ids [3]string
	for i, inst := range []string{"a", "b", "c"} {
		ids[i] = w.join("g", inst, "t")
		w.settle("g")
	}
	count := map[string]int{}
	for p, owner := range w.owners("g") {
		count[owner]++
		desc := w.partition("g", p.Topic, p.Partition)
		if _, ok := w.commit(owner, "t", p.Partition, desc.Epoch, 100+int64(p.Partition), false).(group.CommitReply); !ok {
			t.Fatalf("commit %v failed", p)
		}
	}
	for _, id := range ids {
		if count[id] != 4 {
			t.Fatalf("owners before the 4th join: %v", count)
		}
		w.heartbeat(id)
	}
	return w, ids
}

func TestMailingList(t *testing.T) {
	for _, tc := range []struct {
		name   string
		lookup func(string) (assign.Func, bool)
	}{{"test-assignor", testLookup}, {"sticky", assign.Lookup}} {
		t.Run(tc.name, func(t *testing.T) {
			defer group.SetAssignorLookup(tc.lookup)()
			mailingList(t)
		})
	}
}

func mailingList(t *testing.T) {
	w, ids := threeMembers(t)
	epochsBefore, ownersBefore := w.epochs("g"), w.owners("g")
	from := len(w.sent)

	d := w.join("g", "d", "t")
	if got := w.replies[w.ref].(group.JoinReply).Grants; len(got) != 0 {
		t.Fatalf("newcomer got %v at join; every partition is owned", got)
	}
	moved := map[assign.Partition]string{} // partition -> old owner
	for _, p := range w.describe("g").Partitions {
		id := assign.Partition{Topic: p.Topic, Partition: p.Partition}
		switch {
		case p.State == group.Revoking:
			if p.Target != d || p.Epoch != epochsBefore[id]+1 || p.OwnerEpoch != epochsBefore[id] {
				t.Fatalf("revoking %+v: want target %s at epoch %d", p, d, epochsBefore[id]+1)
			}
			moved[id] = p.Owner
		case p.State != group.Owned || p.Owner != ownersBefore[id] || p.Epoch != epochsBefore[id]:
			t.Fatalf("unmoved partition touched: %+v (was %s@%d)", p, ownersBefore[id], epochsBefore[id])
		}
	}
	if len(moved) != 3 {
		t.Fatalf("moved %v, want 3 partitions", moved)
	}
	perOwner := map[string]assign.Partition{}
	for p, owner := range moved {
		perOwner[owner] = p
	}
	for _, id := range ids {
		p, ok := perOwner[id]
		revokes := revokesFor(w.sent[from:], id)
		if !ok || len(revokes) != 1 || revokes[0].Partition != p.Partition || revokes[0].Epoch != epochsBefore[p] {
			t.Fatalf("member %s: moved %v, revokes %v", id, perOwner, revokes)
		}
	}
	if fences := fencesIn(w.sent[from:]); len(fences) != 6 { // 3 fences to each gateway
		t.Fatalf("fences sent: %v", fences)
	}

	w.heartbeat(d)
	noGrant := func(when string) {
		t.Helper()
		if g := grantsFor(w.sent[from:], d); len(g) != 0 {
			t.Fatalf("%s: newcomer already granted %v", when, g)
		}
	}
	w.advance(time.Millisecond)
	w.pollUntilParked("gw1")
	noGrant("after gw1 acked")
	w.advance(time.Millisecond)
	w.release(ids[0], 500)
	noGrant("after a released, before gw2 acked")

	w.advance(3 * time.Millisecond)
	w.pollUntilParked("gw2")
	granted := grantsFor(w.sent[from:], d)
	if len(granted) != 1 || granted[0].Partition != perOwner[ids[0]].Partition || granted[0].Offset != 500 ||
		granted[0].Epoch != epochsBefore[perOwner[ids[0]]]+1 {
		t.Fatalf("after gw2 acked: grants %+v, want a's partition %v at offset 500", granted, perOwner[ids[0]])
	}
	for i, id := range ids[1:] {
		w.heartbeat(d)
		w.advance(time.Millisecond)
		w.release(id, 600+int64(i))
		granted = grantsFor(w.sent[from:], d)
		last := granted[len(granted)-1]
		if len(granted) != i+2 || last.Partition != perOwner[id].Partition || last.Offset != 600+int64(i) {
			t.Fatalf("after %s released: grants %+v", id, granted)
		}
	}
	for id, epoch := range w.epochs("g") {
		if _, ok := moved[id]; !ok && epoch != epochsBefore[id] {
			t.Fatalf("unmoved %v epoch changed %d -> %d", id, epochsBefore[id], epoch)
		}
	}
	for _, id := range ids {
		if r := revokesFor(w.sent[from:], id); len(r) != 1 {
			t.Fatalf("member %s got revokes %v", id, r)
		}
	}
}

// A member that never releases loses the partition after handoff_timeout,
// not a moment earlier.
func TestHandoffTimeout(t *testing.T) {
	w, _ := threeMembers(t, longSessions)
	d := w.join("g", "d", "t")
	start := w.now
	w.settleGateways()
	w.advanceTo(start.Add(w.cfg.HandoffTimeout - time.Millisecond))
	if n := w.ownedBy("g", d); n != 0 {
		t.Fatalf("%d granted before handoff_timeout", n)
	}
	w.advanceTo(start.Add(w.cfg.HandoffTimeout))
	if n := w.ownedBy("g", d); n != 3 {
		t.Fatalf("after handoff_timeout: newcomer owns %d, want 3", n)
	}
}

func longSessions(c *group.Config) { c.SessionTimeout = time.Minute }

func (w *world) ownedBy(g, id string) int {
	n := 0
	for _, owner := range w.owners(g) {
		if owner == id {
			n++
		}
	}
	return n
}

// settleGateways lets every gateway ack everything.
func (w *world) settleGateways() {
	w.t.Helper()
	for _, id := range sortedMapKeys(w.gateways) {
		w.pollUntilParked(id)
	}
}

// keepAliveUntil advances time to `to` in small steps; the listed members
// heartbeat whenever their held heartbeat was answered.
func (w *world) keepAliveUntil(to time.Time, ids ...string) {
	w.t.Helper()
	for w.now.Before(to) {
		next := w.now.Add(100 * time.Millisecond)
		if next.After(to) {
			next = to
		}
		w.advanceTo(next)
		for _, id := range ids {
			if w.isMember(w.clients[id].group, id) {
				w.heartbeat(id)
			}
		}
		for _, id := range sortedMapKeys(w.gateways) {
			if !w.stuck[id] {
				w.poll(id)
			}
		}
	}
}

func (w *world) lastContact(g, id string) time.Time {
	for _, m := range w.describe(g).Members {
		if m.ID == id {
			return m.LastContact
		}
	}
	w.t.Fatalf("no member %s", id)
	return time.Time{}
}

// A dead member's partitions are fenced and reassigned without waiting for
// commits, once the gateways are safe.
func TestSessionExpiry(t *testing.T) {
	w, ids := threeMembers(t)
	w.settleGateways()
	dead, alive := ids[0], ids[1:]
	// dead's held heartbeat is answered at heartbeat_wait; then it is silent.
	w.keepAliveUntil(w.now.Add(w.cfg.HeartbeatWait), alive...)
	last := w.lastContact("g", dead)
	w.keepAliveUntil(last.Add(w.cfg.SessionTimeout-time.Millisecond), alive...)
	if !w.isMember("g", dead) {
		t.Fatal("member expired before its session timeout")
	}
	from := len(w.sent)
	w.keepAliveUntil(last.Add(w.cfg.SessionTimeout), alive...)
	if w.isMember("g", dead) {
		t.Fatal("silent member still alive")
	}
	if fences := fencesIn(w.sent[from:]); len(fences) != 8 { // 4 partitions, 2 gateways
		t.Fatalf("fences for the dead member's partitions: %v", fences)
	}
	w.settleGateways()
	w.keepAliveUntil(w.now.Add(time.Millisecond), alive...)
	if w.revoking("g") {
		t.Fatalf("handoff waits for a dead member: %+v", w.describe("g").Partitions)
	}
	if w.ownedBy("g", alive[0]) != 6 || w.ownedBy("g", alive[1]) != 6 {
		t.Fatalf("owners after expiry: %v", w.owners("g"))
	}
}

// A gateway that stops polling is safe only once silent strictly longer
// than gateway_timeout.
func TestSilentGateway(t *testing.T) {
	w, ids := threeMembers(t, longSessions)
	w.settleGateways()
	lastSeen := w.m.Gateways()[1].LastSeen
	w.advance(time.Second)
	d := w.join("g", "d", "t")
	w.pollUntilParked("gw1")
	for _, id := range ids {
		w.release(id, 1000)
	}
	// gw2's held poll was answered with the fences, but it never polls
	// again.
	w.advanceTo(lastSeen.Add(w.cfg.GatewayTimeout - time.Millisecond))
	w.pollUntilParked("gw1")
	w.advanceTo(lastSeen.Add(w.cfg.GatewayTimeout))
	if n := w.ownedBy("g", d); n != 0 {
		t.Fatalf("%d granted while gw2 was silent for exactly gateway_timeout", n)
	}
	w.advanceTo(lastSeen.Add(w.cfg.GatewayTimeout + time.Millisecond))
	if n := w.ownedBy("g", d); n != 3 {
		t.Fatalf("gw2 silent past gateway_timeout: newcomer owns %d, want 3", n)
	}
	gws := w.m.Gateways()
	if len(gws) != 2 || gws[1].ID != "gw2" || !gws[1].Silent || gws[0].Silent {
		t.Fatalf("gateways: %+v", gws)
	}
}

// With the revoked holder's capability expired everywhere, an unresponsive
// gateway no longer blocks the grant.
func TestExpiredCapabilitySafety(t *testing.T) {
	w := newWorld(t, func(c *group.Config) {
		c.CapabilityLease = 4 * time.Second
		c.GatewayTimeout = time.Minute
		c.HandoffTimeout = time.Minute
	})
	w.topics(map[string]int32{"t": 2})
	w.pollUntilParked("gw1")
	a := w.join("g", "a", "t")
	exp := w.clients[a].held[assign.Partition{Topic: "t", Partition: 1}].ExpiresAt
	w.heartbeat(a)
	// gw1 is now stuck (keeps its held poll, never acks).
	b := w.join("g", "b", "t")
	w.release(a, 7)
	safeAt := exp.Add(w.cfg.Leeway + w.cfg.MaxClockSkew)
	w.advanceTo(safeAt)
	if n := w.ownedBy("g", b); n != 0 {
		t.Fatalf("granted at exp+leeway+skew, capability not yet expired everywhere")
	}
	w.advanceTo(safeAt.Add(time.Millisecond))
	p := w.partition("g", "t", 1)
	if p.Owner != b || p.Committed != 7 {
		t.Fatalf("after expiry: %+v", p)
	}
	// No renewal ever went to a for the revoked partition.
	for _, gr := range w.clients[a].grants {
		if gr.Partition == 1 && gr.ExpiresAt.After(exp) {
			t.Fatalf("revoked capability renewed: %+v", gr)
		}
	}
}

// Retarget while revoking: to another member keeps the pending epoch; back
// to the holder takes a new epoch and a new fence.
func TestRetargetWhileRevoking(t *testing.T) {
	w := newWorld(t)
	w.topics(map[string]int32{"t": 2})
	w.pollUntilParked("gw1")
	a := w.join("g", "a", "t")
	w.heartbeat(a)
	b := w.join("g", "b", "t")
	p := w.revokingPartition("g")
	if p.Owner != a || p.Target != b {
		t.Fatalf("revoking %+v", p)
	}
	e := p.Epoch

	// b leaves before the handoff completes; c joins: b's target moves on.
	ref := w.nextRef()
	w.step(group.Leave{Ref: ref, Group: "g", MemberID: b})
	mustReply[group.LeaveReply](t, w, ref)
	p = w.partition("g", p.Topic, p.Partition)
	if p.State != group.Revoking || p.Target != a || p.Epoch != e+1 {
		t.Fatalf("back to a: %+v, want revoking to a at epoch %d", p, e+1)
	}
	c := w.join("g", "c", "t")
	p = w.partition("g", p.Topic, p.Partition)
	if p.State != group.Revoking || p.Target != c || p.Epoch != e+1 {
		t.Fatalf("retarget to c: %+v, want revoking to c at epoch %d", p, e+1)
	}
	w.heartbeat(c)
	w.pollUntilParked("gw1")
	w.release(a, 3)
	g := grantsFor(w.sent, c)
	if len(g) != 1 || g[0].Epoch != e+1 || g[0].Offset != 3 {
		t.Fatalf("c's grant: %+v", g)
	}
	if other := w.partition("g", "t", 1-p.Partition); other.Owner != a || other.Epoch != 1 {
		t.Fatalf("unmoved partition touched: %+v", other)
	}
}

func (w *world) revokingPartition(g string) group.PartitionDescription {
	w.t.Helper()
	var found []group.PartitionDescription
	for _, p := range w.describe(g).Partitions {
		if p.State == group.Revoking {
			found = append(found, p)
		}
	}
	if len(found) != 1 {
		w.t.Fatalf("want one revoking partition, got %+v", found)
	}
	return found[0]
}

// Commits are fenced by epoch and never move the offset back.
func TestCommitRules(t *testing.T) {
	w := newWorld(t)
	w.topics(map[string]int32{"t": 2, "u": 1})
	a := w.join("g", "a", "t")
	e := w.partition("g", "t", 0).Epoch
	if _, ok := w.commit(a, "t", 0, e, 10, false).(group.CommitReply); !ok {
		t.Fatal("commit at the current epoch refused")
	}
	cases := []struct {
		name   string
		topic  string
		part   int32
		epoch  uint64
		offset int64
		code   api.Code
	}{
		{"stale epoch", "t", 0, e - 1, 11, api.CodeStaleEpoch},
		{"future epoch", "t", 0, e + 1, 11, api.CodeStaleEpoch},
		{"regression", "t", 0, e, 9, api.CodeOffsetRegression},
		{"never held", "u", 0, 1, 1, api.CodeStaleEpoch},
		{"negative without release", "t", 0, e, -1, api.CodeBadRequest},
	}
	for _, tc := range cases {
		msg := w.commit(a, tc.topic, tc.part, tc.epoch, tc.offset, false)
		if r, ok := msg.(group.Rejected); !ok || r.Code != tc.code {
			t.Errorf("%s: got %#v, want %s", tc.name, msg, tc.code)
		}
	}
	if got := w.partition("g", "t", 0).Committed; got != 10 {
		t.Fatalf("committed offset %d after refused commits, want 10", got)
	}
	// All or nothing: one bad offset refuses the whole commit.
	ref := w.nextRef()
	w.step(group.Commit{Ref: ref, Group: "g", MemberID: a, Offsets: []group.CommitOffset{
		{Topic: "t", Partition: 1, Epoch: w.partition("g", "t", 1).Epoch, Offset: 5},
		{Topic: "t", Partition: 0, Epoch: e, Offset: 1},
	}})
	mustReject(t, w, ref, api.CodeOffsetRegression)
	if got := w.partition("g", "t", 1).Committed; got != -1 {
		t.Fatalf("partial commit applied: %d", got)
	}
	// While revoking, the old epoch commits; after the handoff it is stale.
	b := w.join("g", "b", "t")
	p := w.revokingPartition("g")
	if _, ok := w.commit(b, p.Topic, p.Partition, p.Epoch, 50, false).(group.Rejected); !ok {
		t.Fatal("target committed before its grant")
	}
	if _, ok := w.commit(a, p.Topic, p.Partition, p.OwnerEpoch, 50, true).(group.CommitReply); !ok {
		t.Fatal("revoking holder's commit at its epoch refused")
	}
	if msg := w.commit(a, p.Topic, p.Partition, p.OwnerEpoch, 51, false); msg.(group.Rejected).Code != api.CodeStaleEpoch {
		t.Fatalf("commit after the handoff: %#v", msg)
	}
	if got := w.partition("g", p.Topic, p.Partition); got.Owner != b || got.Committed != 50 {
		t.Fatalf("after handoff: %+v", got)
	}
	ref = w.nextRef()
	w.step(group.Commit{Ref: ref, Group: "g", MemberID: "nobody", Offsets: []group.CommitOffset{{Topic: "t"}}})
	mustReject(t, w, ref, api.CodeUnknownMember)
}

// Creeping: with max_moves_per_second=1 the three revokes start at least a
// second apart.
func TestCreeping(t *testing.T) {
	w, _ := threeMembers(t)
	one := 1
	ref := w.nextRef()
	w.step(group.SetGroupConfig{Ref: ref, Group: "g", MaxMovesPerSecond: &one})
	if r := mustReply[group.GroupConfigReply](t, w, ref); r.Config.MaxMovesPerSecond != 1 {
		t.Fatalf("config: %+v", r.Config)
	}
	from := len(w.sent)
	w.join("g", "d", "t")
	var starts []time.Time
	for range 40 {
		for _, p := range w.describe("g").Partitions {
			if p.State == group.Revoking && !containsTime(starts, p.RevokeStarted) {
				starts = append(starts, p.RevokeStarted)
			}
		}
		w.settleGateways()
		w.advance(100 * time.Millisecond)
	}
	if len(starts) != 3 || len(fencesIn(w.sent[from:])) != 6 {
		t.Fatalf("revoke starts %v, want 3", starts)
	}
	for i := 1; i < len(starts); i++ {
		if gap := starts[i].Sub(starts[i-1]); gap < time.Second {
			t.Fatalf("revokes %s apart: %v", gap, starts)
		}
	}
}

func containsTime(ts []time.Time, t time.Time) bool {
	for _, x := range ts {
		if x.Equal(t) {
			return true
		}
	}
	return false
}
