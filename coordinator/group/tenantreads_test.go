package group_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/coordinator/assign"
	"github.com/capgate/capgate/coordinator/group"
)

// BenchmarkTenantReads: what one tenant group read costs inside the
// coordinator's loop at the limits' defaults, beside a heartbeat.
func BenchmarkTenantReads(b *testing.B) {
	defer group.SetAssignorLookup(assign.Lookup)()
	bm := newBenchMachine(b, map[string]int32{"t": 1})
	for i := range 9990 {
		bm.ref++
		bm.step(group.Join{Ref: bm.ref, Group: fmt.Sprintf("g-%05d", i), ClientID: "c", Topics: []string{"t"},
			Credential: group.Credential{ID: fmt.Sprintf("cred-%d", i)}})
	}
	bm.now = bm.now.Add(time.Minute)
	bm.m.Tick(bm.now)
	bm.ready()
	bm.m.Advance()
	topics := make([]string, 1000)
	for i := range topics {
		topics[i] = fmt.Sprintf("a-%03d-%s", i, strings.Repeat("x", 200))
	}
	for range 140 {
		bm.ref++
		bm.step(group.Join{Ref: bm.ref, Group: "big", ClientID: "c", Topics: topics, Credential: group.Credential{ID: "big"}})
	}
	v, _ := bm.m.KafkaView("big", 1000, 10000, 1<<30)
	b.Logf("state %d, groups %d, big members %d", bm.m.StateBytes(), len(bm.m.Groups()), len(v.Members))
	b.Run("groups-list", func(b *testing.B) {
		for b.Loop() {
			bm.m.GroupsMatching([]string{"g-0*"}, "", 1000)
		}
	})
	b.Run("describe-140x1000", func(b *testing.B) {
		for b.Loop() {
			bm.m.KafkaView("big", 1000, 10000, 1<<30)
		}
	})
	b.Run("heartbeat", func(b *testing.B) {
		id := bm.join("g-00000", "t")
		for b.Loop() {
			bm.ref++
			bm.now = bm.now.Add(time.Microsecond)
			bm.step(group.Heartbeat{Ref: bm.ref, Group: "g-00000", MemberID: id})
		}
	})
}

// TestGroupListingWalksOnlyItsNames is redteam14 #3's other half: a
// tenant's GET /v1/groups (GroupsMatching) sorted every group's name in
// the coordinator at each call, inside the loop — 12 ms at the default
// 10,000 groups, for a page of one group. The machine now keeps the
// names sorted; a listing allocates what it answers, not a copy of every
// name (measured in bytes: 2,000 groups made ~32 KB a call).
func TestGroupListingWalksOnlyItsNames(t *testing.T) {
	defer group.SetAssignorLookup(assign.Lookup)()
	cfg := group.DefaultConfig()
	m, err := group.New(cfg, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	now := t0
	m.Step(now, group.Topics{Partitions: map[string]int32{"t": 1}})
	for i := range 2000 {
		m.Step(now, group.Join{Ref: group.Ref(i + 1), Group: fmt.Sprintf("g-%05d", i), Topics: []string{"t"},
			Credential: group.Credential{ID: fmt.Sprintf("cred-%d", i)}})
		if _, err := m.Ready(); err != nil {
			t.Fatal(err)
		}
		m.Advance()
	}
	if names, _ := m.GroupsMatching([]string{"g-01999"}, "", 10); len(names) != 1 {
		t.Fatalf("listing g-01999: %v", names)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 100 {
		m.GroupsMatching([]string{"g-01999"}, "", 10)
	}
	runtime.ReadMemStats(&after)
	if perCall := (after.TotalAlloc - before.TotalAlloc) / 100; perCall > 1024 {
		t.Fatalf("listing one group of 2,000 allocates %d bytes a call: every name is copied (and sorted)", perCall)
	}
	if err := m.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}
