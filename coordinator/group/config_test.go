package group_test

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/coordinator/group"
)

func TestConfigValidate(t *testing.T) {
	if err := group.DefaultConfig().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, tc := range []struct {
		want   string
		mutate func(*group.Config)
	}{
		{"group.session_timeout: must be within [1s, 5m0s], got 0s", func(c *group.Config) { c.SessionTimeout = 0 }},
		{"group.session_timeout_min: must be > 0, got 0s", func(c *group.Config) { c.SessionTimeoutMin = 0 }},
		{"group.session_timeout_max: must be >= session_timeout_min (1s), got 500ms", func(c *group.Config) { c.SessionTimeoutMax = 500 * time.Millisecond }},
		{"group.heartbeat_wait: must be > 0, got 0s", func(c *group.Config) { c.HeartbeatWait = 0 }},
		{"group.handoff_timeout: must be > 0, got -1s", func(c *group.Config) { c.HandoffTimeout = -time.Second }},
		{"group.gateway_timeout: must be > 0, got 0s", func(c *group.Config) { c.GatewayTimeout = 0 }},
		{"group.sync_wait_max: must be < gateway_timeout - max_clock_skew (14s), got 14s", func(c *group.Config) { c.SyncWaitMax = 14 * time.Second }},
		{"group.max_clock_skew: must be >= 0, got -1s", func(c *group.Config) { c.MaxClockSkew = -time.Second }},
		{"group.leeway: must be >= 0, got -1s", func(c *group.Config) { c.Leeway = -time.Second }},
		{"group.renew_token_grace: must be within [0, 10s], got 11s", func(c *group.Config) { c.RenewTokenGrace = 11 * time.Second }},
		{"group.renew_token_grace: must be within [0, 10s], got -1s", func(c *group.Config) { c.RenewTokenGrace = -time.Second }},
		{"group.capability_lease: must be > 0, got 0s", func(c *group.Config) { c.CapabilityLease = 0 }},
		{"group.max_lease: must be >= capability_lease (1m0s), got 30s", func(c *group.Config) { c.MaxLease = 30 * time.Second }},
		{`group.offset_reset: must be "earliest" or "latest", got "middle"`, func(c *group.Config) { c.OffsetReset = "middle" }},
		{"group.sync_log_max: must be >= 1, got 0", func(c *group.Config) { c.SyncLogMax = 0 }},
		{"group.max_moves_per_second: must be within [0, 1000000], got -2", func(c *group.Config) { c.MaxMovesPerSecond = -2 }},
		{"group.max_moves_per_second: must be within [0, 1000000], got 1000001", func(c *group.Config) { c.MaxMovesPerSecond = 1_000_001 }},
		{"group.handoff_timeout: must be <= handoff_timeout_max (5m0s), got 6m0s", func(c *group.Config) { c.HandoffTimeout = 6 * time.Minute }},
		// The hold is raised to initial_assign_delay_max (windowHold), not capped by it.
		{"group.initial_assign_hold_max: must be within [0, 1m0s] (a hold shorter than initial_assign_delay_max is raised to it), got -1s", func(c *group.Config) { c.InitialAssignHoldMax = -time.Second }},
		{`group.assignor: unknown assignor "round-robin"`, func(c *group.Config) { c.Assignor = "round-robin" }},
	} {
		c := group.DefaultConfig()
		tc.mutate(&c)
		if err := c.Validate(); err == nil || err.Error() != tc.want {
			t.Errorf("got %v, want %s", err, tc.want)
		}
		if _, err := group.New(c, rand.New(rand.NewPCG(1, 1))); err == nil {
			t.Errorf("New accepted %s", tc.want)
		}
	}
	if _, err := group.New(group.DefaultConfig(), nil); err == nil {
		t.Error("New accepted a nil rng")
	}
}

func TestDescribeSorted(t *testing.T) {
	w := newWorld(t)
	w.topics(map[string]int32{"b": 2, "a": 3})
	for _, inst := range []string{"z", "y", "x"} {
		w.join("g", inst, "a", "b")
	}
	w.settle("g")
	w.join("h", "x", "a")
	if got := w.m.Groups(); strings.Join(got, ",") != "g,h" {
		t.Fatalf("groups %v", got)
	}
	d := w.describe("g")
	for i := 1; i < len(d.Members); i++ {
		if d.Members[i-1].ID >= d.Members[i].ID {
			t.Fatalf("members not sorted: %+v", d.Members)
		}
	}
	want := []string{"a/0", "a/1", "a/2", "b/0", "b/1"}
	for i, p := range d.Partitions {
		if got := p.Topic + "/" + string(rune('0'+p.Partition)); got != want[i] || p.State != group.Owned {
			t.Fatalf("partitions %+v", d.Partitions)
		}
	}
	owner := d.Partitions[0].Owner
	w.commit(owner, "a", 0, d.Partitions[0].Epoch, 12, false)
	if offs := w.m.Offsets("g"); len(offs) != 1 || offs[0].Offset != 12 || offs[0].Topic != "a" {
		t.Fatalf("offsets %+v", offs)
	}
	if _, ok := w.m.DescribeGroup("nope"); ok || w.m.Offsets("nope") != nil {
		t.Fatal("unknown group described")
	}
}

func TestRestoreRejectsBadSnapshot(t *testing.T) {
	cfg := group.DefaultConfig()
	rng := rand.New(rand.NewPCG(1, 1))
	bad := []group.Snapshot{
		{Partitions: []group.PartitionRecord{{Group: "g", Topic: "t", Epoch: 1, State: "lost"}}},
		{Partitions: []group.PartitionRecord{{Group: "g", Topic: "t", Epoch: 1, State: group.Revoking, Holder: "m", HolderEpoch: 1}}},
		{Partitions: []group.PartitionRecord{{Group: "g", Topic: "t", Epoch: 2, State: group.Owned, Holder: "m", HolderEpoch: 1}}},
		// Combinations the ownership sum type cannot hold: an owner with
		// revoking flags, a holder of nobody.
		{Partitions: []group.PartitionRecord{{Group: "g", Topic: "t", Epoch: 2, State: group.Owned, Holder: "m", HolderEpoch: 2, Released: true}}},
		{Partitions: []group.PartitionRecord{{Group: "g", Topic: "t", Epoch: 2, State: group.Owned, Holder: "m", HolderEpoch: 2, Forced: true}}},
		{Partitions: []group.PartitionRecord{{Group: "g", Topic: "t", Epoch: 2, State: group.Owned, HolderEpoch: 2}}},
		{Partitions: []group.PartitionRecord{{Group: "g", Topic: "t", Epoch: 2, State: group.Revoking, HolderEpoch: 1}}},
		{Members: []group.MemberRecord{{Group: "g", MemberID: "m", TopicPattern: "("}}},
		{Groups: []group.GroupRecord{{Group: "g", Config: group.GroupConfig{Assignor: "nope"}}}},
	}
	for i, snap := range bad {
		if _, err := group.Restore(cfg, rng, snap, t0); err == nil {
			t.Errorf("snapshot %d accepted", i)
		}
	}
}
