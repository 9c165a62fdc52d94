package group_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/group"
)

// commitMeta commits offset with metadata on one partition the member
// holds and returns the reply.
func (w *world) commitMeta(id, topic string, partition int32, offset int64, metadata string) group.Message {
	w.t.Helper()
	c := w.clients[id]
	ref := w.nextRef()
	w.step(group.Commit{Ref: ref, Group: c.group, MemberID: id, Offsets: []group.CommitOffset{{
		Topic: topic, Partition: partition, Epoch: w.partition(c.group, topic, partition).Epoch, Offset: offset, Metadata: metadata}}})
	return w.replies[ref]
}

// commitUntilRefused commits offset 1 with metadata on t/0, t/1, …
// (of 8) until one is refused, and returns how many were accepted.
func (w *world) commitUntilRefused(id, metadata string) int32 {
	w.t.Helper()
	accepted := int32(0)
	for ; accepted < 8; accepted++ {
		if _, ok := w.commitMeta(id, "t", accepted, 1, metadata).(group.CommitReply); !ok {
			break
		}
	}
	return accepted
}

func mustCommit(t *testing.T, msg group.Message, what string) {
	t.Helper()
	if _, ok := msg.(group.CommitReply); !ok {
		t.Fatalf("%s: want the commit accepted, got %#v", what, msg)
	}
}

// The attack of redteam4 #1: committed metadata (up to
// commit_metadata_bytes per partition, kept for offsets_retention after
// the members left) is counted in the state estimate, so a commit that
// would take it past limits.state_bytes is refused as a join is; a commit
// that does not grow it (the same, less or no metadata) is accepted, and
// reaping the group gives the room back.
func TestCommitMetadataCountsInTheStateBudget(t *testing.T) {
	w := newWorld(t, func(c *group.Config) {
		c.Limits.StateBytes = 48 << 10 // two groups of 8 partitions and a member each (~33 KiB), and 3 full metadata
		c.Limits.EmptyGroupTTL = c.MaxLease + c.Leeway + c.MaxClockSkew
		c.Limits.OffsetsRetention = c.Limits.EmptyGroupTTL
	})
	w.topics(map[string]int32{"t": 8})
	w.pollUntilParked("gw1")
	attacker := w.join("g", "a", "t")
	w.settle("g")
	other := w.join("h", "b", "t")
	w.settle("h")
	full := strings.Repeat("m", w.cfg.Limits.CommitMetadataBytes)

	accepted := w.commitUntilRefused(attacker, full)
	if accepted == 0 || accepted == 8 {
		t.Fatalf("%d commits of %d bytes of metadata fit in %d bytes of state", accepted, len(full), w.cfg.Limits.StateBytes)
	}
	if w.m.StateBytes() > w.cfg.Limits.StateBytes {
		t.Fatalf("state estimate %d past state_bytes %d", w.m.StateBytes(), w.cfg.Limits.StateBytes)
	}
	refused := w.commitMeta(attacker, "t", accepted, 1, full)
	mustLimit(t, refused, "state_bytes")
	if msg := refused.(group.Rejected).Message; !strings.Contains(msg, "state_bytes") || !strings.Contains(msg, "metadata") {
		t.Fatalf("the refusal does not name the setting and what to do: %q", msg)
	}
	if p := w.partition("g", "t", accepted); p.Committed != -1 || p.Metadata != "" {
		t.Fatalf("a refused commit changed the partition: %+v", p)
	}
	// Not growing the state is never refused: the same metadata at a new
	// offset, no metadata on a fresh partition, less metadata.
	mustCommit(t, w.commitMeta(attacker, "t", 0, 2, full), "the same metadata again")
	mustCommit(t, w.commitMeta(attacker, "t", accepted, 2, ""), "no metadata")
	mustCommit(t, w.commitMeta(attacker, "t", 0, 3, "small"), "less metadata")
	// Shrinking gave the room back, exactly.
	mustCommit(t, w.commitMeta(attacker, "t", accepted, 3, full), "a commit into the room the smaller metadata freed")
	mustLimit(t, w.commitMeta(other, "t", 0, 1, full), "state_bytes")

	// The attacker leaves; its offsets stay until offsets_retention, then
	// the group is reaped and another tenant's commit fits.
	ref := w.nextRef()
	w.step(group.Leave{Ref: ref, Group: "g", MemberID: attacker})
	w.keepAliveUntil(w.now.Add(time.Minute), other)
	mustLimit(t, w.commitMeta(other, "t", 0, 1, full), "state_bytes")
	w.keepAliveUntil(w.now.Add(w.cfg.Limits.OffsetsRetention*2), other)
	if _, ok := w.m.DescribeGroup("g"); ok {
		t.Fatalf("group g still held %s after it emptied", w.cfg.Limits.OffsetsRetention*2)
	}
	mustCommit(t, w.commitMeta(other, "t", 0, 1, full), "a commit after the group holding the metadata was reaped")
}

// The attack of redteam11: one tenant within its groups_per_credential
// filled state_bytes alone with partitions and full commit metadata,
// after which every other tenant's join and metadata-growing commit was
// refused. The groups a tenant created hold at most
// state_bytes_per_tenant: its commits are refused past it, naming it,
// and another tenant's commits go on in the room left.
func TestOneTenantsGroupsHoldAtMostItsShare(t *testing.T) {
	w := newWorld(t, func(c *group.Config) {
		c.Limits.StateBytes = 96 << 10          // without shares A takes all 8 full metadata
		c.Limits.StateBytesPerTenant = 24 << 10 // a group of 8 partitions (~14 KiB) and 2 full metadata
	})
	w.topics(map[string]int32{"t": 8})
	w.pollUntilParked("gw1")
	a := w.joinAs(credA, group.Join{Group: "ga"}).(group.JoinReply).MemberID
	w.settle("ga")
	b := w.joinAs(credB, group.Join{Group: "gb"}).(group.JoinReply).MemberID
	w.settle("gb")
	full := strings.Repeat("m", w.cfg.Limits.CommitMetadataBytes)

	accepted := w.commitUntilRefused(a, full)
	if accepted == 0 || accepted > 2 {
		t.Fatalf("tenant A's group took %d commits of %d bytes of metadata; its share (%d) holds 2", accepted, len(full), w.cfg.Limits.StateBytesPerTenant)
	}
	refused := w.commitMeta(a, "t", accepted, 1, full)
	mustLimit(t, refused, "state_bytes_per_tenant")
	if r := refused.(group.Rejected); r.Details["tenant"] != credA.ID || !strings.Contains(r.Message, "state_bytes_per_tenant") {
		t.Fatalf("the refusal does not name the tenant and the setting: %#v", r)
	}
	mustCommit(t, w.commitMeta(a, "t", 0, 2, full), "tenant A's commit of the same metadata again")
	for p := int32(0); p < accepted; p++ {
		mustCommit(t, w.commitMeta(b, "t", p, 1, full), "tenant B's commit beside A's full share")
	}
	if w.m.StateBytes() > w.cfg.Limits.StateBytes {
		t.Fatalf("state estimate %d past state_bytes %d", w.m.StateBytes(), w.cfg.Limits.StateBytes)
	}
}

// redteam13 #3: state_bytes_per_tenant alone let a few tenants fill the
// state together (four at the defaults: 4 × 48 MiB = state_bytes), after
// which every other tenant's join was refused state_bytes. Now a tenant
// never grows past the state it leaves free: four tenants filling their
// groups one after the other are held to less and less (the fourth is
// refused its 8-partition group), and a newcomer's small group still
// fits. Without the rule the fourth tenant filled the state and the
// newcomer was refused.
func TestFewTenantsCannotFillTheStateTogether(t *testing.T) {
	w := newWorld(t, func(c *group.Config) {
		c.Limits.StateBytes = 94 << 10          // four tenants at their share fill it (as at the defaults) but for 1 KiB
		c.Limits.StateBytesPerTenant = 24 << 10 // a group of 8 partitions (~14 KiB) and 2 full metadata
	})
	w.topics(map[string]int32{"t": 8, "s": 1})
	w.pollUntilParked("gw1")
	full := strings.Repeat("m", w.cfg.Limits.CommitMetadataBytes)
	joined := 0
	for i := range 4 {
		cred := group.Credential{ID: fmt.Sprintf("jti-%d", i), Issuer: "capgate", Subject: fmt.Sprintf("svc-%d", i)}
		name := fmt.Sprintf("g%d", i)
		msg := w.joinAs(cred, group.Join{Group: name})
		reply, ok := msg.(group.JoinReply)
		if !ok {
			mustLimit(t, msg, "state_bytes")
			continue
		}
		joined++
		w.settle(name)
		n := w.commitUntilRefused(reply.MemberID, full)
		t.Logf("tenant %d: %d commits, state %d", i, n, w.m.StateBytes())
		if w.m.StateBytes() > w.cfg.Limits.StateBytes {
			t.Fatalf("state estimate %d past state_bytes %d", w.m.StateBytes(), w.cfg.Limits.StateBytes)
		}
	}
	if joined < 3 {
		t.Fatalf("%d of 4 tenants created their group in %d bytes of state", joined, w.cfg.Limits.StateBytes)
	}
	newcomer := group.Credential{ID: "jti-new", Issuer: "capgate", Subject: "svc-new"}
	msg := w.joinAs(newcomer, group.Join{Group: "gnew", Topics: []string{"s"}})
	if _, ok := msg.(group.JoinReply); !ok {
		t.Fatalf("a newcomer's one-partition group beside four tenants that filled theirs: %#v (state %d of %d)", msg, w.m.StateBytes(), w.cfg.Limits.StateBytes)
	}
}

// redteam14 #1: members_per_credential bounds how many members a tenant
// has, not how large they are, and members were in no tenant's share:
// tenant A's members each listing 100 topics of long names (a cluster
// with that many topics A may read: the shell asks that they exist; a
// topic_pattern member resolving 5,000 topics is ~480 KiB) filled
// state_bytes alone, and tenant B's join was refused state_bytes. Now a tenant's live members count in its share: A's joins
// are refused at state_bytes_per_tenant, naming it, and B joins.
func TestOneTenantsLargeMembersHoldAtMostItsShare(t *testing.T) {
	w := newWorld(t, func(c *group.Config) {
		c.Limits.StateBytes = 512 << 10          // ~14 of A's members, each ~28 KiB
		c.Limits.StateBytesPerTenant = 128 << 10 // ~4 of them
	})
	w.topics(map[string]int32{"t": 1})
	w.pollUntilParked("gw1")
	topics := make([]string, 100)
	for i := range topics {
		topics[i] = fmt.Sprintf("a-%03d-%s", i, strings.Repeat("x", 180))
	}
	joined := 0
	var refused group.Message
	for range 40 {
		msg := w.joinAs(credA, group.Join{Group: "ga", Topics: topics})
		if _, ok := msg.(group.JoinReply); !ok {
			refused = msg
			break
		}
		joined++
	}
	t.Logf("tenant A: %d members, state %d of %d", joined, w.m.StateBytes(), w.cfg.Limits.StateBytes)
	mustLimit(t, refused, "state_bytes_per_tenant")
	if r := refused.(group.Rejected); r.Details["tenant"] != credA.ID || !strings.Contains(r.Message, "members") {
		t.Fatalf("the refusal does not name the tenant and say its members count: %#v", r)
	}
	if _, ok := w.joinAs(credB, group.Join{Group: "gb"}).(group.JoinReply); !ok {
		t.Fatalf("tenant B's join beside A's large members: %#v (state %d of %d)", w.replies[w.ref], w.m.StateBytes(), w.cfg.Limits.StateBytes)
	}
}

// redteam14 #2: a rejoin changing the subscription was asked only for
// the state its larger member adds, not for the partitions its new
// topics add to the group: the group's creator grew its share past
// state_bytes_per_tenant by rejoining with a topic of many partitions.
// Now the rejoin is refused, naming the share, and the member keeps its
// subscription.
func TestRejoinWithMoreTopicsAsksTheShare(t *testing.T) {
	w := newWorld(t, func(c *group.Config) {
		c.Limits.StateBytesPerTenant = 32 << 10 // a group and a member, and ~16 partitions
	})
	w.topics(map[string]int32{"t": 1, "big": 64})
	w.pollUntilParked("gw1")
	id := w.joinAs(credA, group.Join{Group: "ga"}).(group.JoinReply).MemberID
	w.settle("ga")
	msg := w.joinAs(credA, group.Join{Group: "ga", MemberID: id, Topics: []string{"t", "big"}})
	if reply, ok := msg.(group.JoinReply); ok {
		t.Fatalf("the rejoin with a 64-partition topic was accepted (%d grants): the group's creator holds %d bytes, its share %d",
			len(reply.Grants), w.m.StateBytes(), w.cfg.Limits.StateBytesPerTenant)
	}
	mustLimit(t, msg, "state_bytes_per_tenant")
	if got := w.describe("ga").Members[0].Topics; len(got) != 1 {
		t.Fatalf("a refused rejoin changed the subscription: %v", got)
	}
}

// redteam14 #5: a refusal for the state share of a group's creator named
// the creator's tenant (details tenant, and the message, with what it
// holds) to whoever asked — another tenant allowed the shared group
// learnt the creator's OAuth client, credential jti or IdP identity. Now
// B's join and commit refused for A's share name neither A nor its
// usage; A's own refusal still names A.
func TestAnotherTenantsShareIsNotNamed(t *testing.T) {
	w := newWorld(t, func(c *group.Config) {
		c.Limits.StateBytesPerTenant = 24 << 10 // a group of 8 partitions (~14 KiB), a member and 2 full metadata
	})
	w.topics(map[string]int32{"t": 8, "u": 8})
	w.pollUntilParked("gw1")
	a := w.joinAs(credA, group.Join{Group: "shared"}).(group.JoinReply).MemberID
	w.settle("shared")
	full := strings.Repeat("m", w.cfg.Limits.CommitMetadataBytes)
	accepted := w.commitUntilRefused(a, full)
	own := w.commitMeta(a, "t", accepted, 1, full)
	mustLimit(t, own, "state_bytes_per_tenant")
	if r := own.(group.Rejected); r.Details["tenant"] != credA.ID {
		t.Fatalf("A's own refusal does not name A: %#v", r)
	}
	leaks := func(what string, msg group.Message) {
		t.Helper()
		r, ok := msg.(group.Rejected)
		if !ok || r.Code != api.CodeLimitExceeded {
			t.Fatalf("%s: want limit_exceeded, got %#v", what, msg)
		}
		if _, named := r.Details["tenant"]; named || strings.Contains(r.Message, credA.ID) || strings.Contains(fmt.Sprint(r.Details), credA.ID) {
			t.Fatalf("%s names the group creator's tenant to another tenant: %s %v", what, r.Message, r.Details)
		}
	}
	leaks("B's join with a topic adding partitions to A's group", w.joinAs(credB, group.Join{Group: "shared", Topics: []string{"t", "u"}}))
	b := w.joinAs(credB, group.Join{Group: "shared"}).(group.JoinReply).MemberID
	w.settle("shared")
	for _, p := range w.describe("shared").Partitions {
		if p.Owner == b && p.Committed < 0 {
			leaks("B's commit growing A's group's metadata", w.commitMeta(b, p.Topic, p.Partition, 1, full))
			return
		}
	}
	t.Fatal("B holds no uncommitted partition of shared")
}
