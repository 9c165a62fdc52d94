package group_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/capgate/capgate/coordinator/assign"
	"github.com/capgate/capgate/coordinator/group"
)

// benchMachine is a machine driven without the test world's checks.
type benchMachine struct {
	m   *group.Machine
	now time.Time
	ref group.Ref
}

func newBenchMachine(b *testing.B, topics map[string]int32, mutate ...func(*group.Config)) *benchMachine {
	b.Helper()
	cfg := group.DefaultConfig()
	cfg.SessionTimeout = 5 * time.Minute
	cfg.InitialAssignDelay = 0 // these measure a group's steady steps; the join window's cost is BenchmarkLoneJoinIntoEmptyGroup's (coordinator)
	for _, f := range mutate {
		f(&cfg)
	}
	m, err := group.New(cfg, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		b.Fatal(err)
	}
	bm := &benchMachine{m: m, now: t0}
	bm.step(group.Topics{Partitions: topics})
	return bm
}

// ready takes the machine's Ready; a failed audit panics.
func (bm *benchMachine) ready() group.Ready {
	rd, err := bm.m.Ready()
	if err != nil {
		panic(err)
	}
	return rd
}

func (bm *benchMachine) step(ev group.Event) group.Ready {
	bm.m.Step(bm.now, ev)
	rd := bm.ready()
	bm.m.Advance()
	return rd
}

func (bm *benchMachine) join(g, topic string) string {
	bm.ref++
	rd := bm.step(group.Join{Ref: bm.ref, Group: g, ClientID: "c", Topics: []string{topic}})
	for _, msg := range rd.Messages {
		if r, ok := msg.(group.JoinReply); ok && r.Ref == bm.ref {
			return r.MemberID
		}
	}
	panic("join refused")
}

// BenchmarkHeartbeat: one held heartbeat per op across 1,000 members of a
// settled group (2,000 partitions), each superseding the member's previous
// one. The baseline is a heartbeat of an unknown member (rejected at once).
func BenchmarkHeartbeat(b *testing.B) {
	defer group.SetAssignorLookup(assign.Lookup)()
	bm := newBenchMachine(b, map[string]int32{"t": 2000})
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = bm.join("g", "t")
	}
	// Let every handoff time out so the group is settled.
	bm.now = bm.now.Add(time.Minute)
	bm.m.Tick(bm.now)
	bm.ready()
	bm.m.Advance()
	b.Run("baseline-unknown-member", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			bm.ref++
			bm.now = bm.now.Add(time.Microsecond)
			bm.step(group.Heartbeat{Ref: bm.ref, Group: "g", MemberID: "nobody"})
		}
	})
	b.Run("members=1000", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			bm.ref++
			bm.now = bm.now.Add(time.Microsecond)
			bm.step(group.Heartbeat{Ref: bm.ref, Group: "g", MemberID: ids[i%len(ids)]})
		}
	})
}

// BenchmarkJoinStorm: 1,000 members join a group of 10,000 partitions one
// after the other (one op = all 1,000 joins, each with its reassignment).
func BenchmarkJoinStorm(b *testing.B) {
	defer group.SetAssignorLookup(assign.Lookup)()
	for _, members := range []int{10, 1000} {
		b.Run(fmt.Sprintf("members=%d/partitions=10000", members), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bm := newBenchMachine(b, map[string]int32{"t": 10000})
				for range members {
					bm.join("g", "t")
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*members), "ns/join")
		})
	}
}

// BenchmarkBulkFence: revoking a member that owns 10,000 partitions fences
// them all in one step; reports the Ready's size.
func BenchmarkBulkFence(b *testing.B) {
	defer group.SetAssignorLookup(assign.Lookup)()
	var rd group.Ready
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		bm := newBenchMachine(b, map[string]int32{"t": 10000})
		bm.step(group.SyncPoll{Ref: 1 << 40, Gateway: "gw1"})
		id := bm.join("g", "t")
		b.StartTimer()
		bm.ref++
		rd = bm.step(group.RevokeMember{Ref: bm.ref, Group: "g", MemberID: id})
	}
	size, err := json.Marshal(rd.Persist)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(rd.Persist)), "records")
	b.ReportMetric(float64(len(size)), "persist-json-bytes")
	b.ReportMetric(float64(len(rd.Messages)), "messages")
}

// BenchmarkJoinStormBatched: the same 1,000 joins delivered as the shell
// delivers a burst, 100 events per StepMany; the baseline is the
// one-by-one storm above.
func BenchmarkJoinStormBatched(b *testing.B) {
	defer group.SetAssignorLookup(assign.Lookup)()
	const members, batch = 1000, 100
	b.ReportAllocs()
	for b.Loop() {
		bm := newBenchMachine(b, map[string]int32{"t": 10000})
		for i := 0; i < members; i += batch {
			evs := make([]group.Event, 0, batch)
			for range batch {
				bm.ref++
				evs = append(evs, group.Join{Ref: bm.ref, Group: "g", ClientID: "c", Topics: []string{"t"}})
			}
			bm.m.StepMany(bm.now, evs)
			bm.ready()
			bm.m.Advance()
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*members), "ns/join")
}
