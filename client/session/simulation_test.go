package session

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
)

// TestSimulatedHandoffsProcessEveryOffsetOnce drives the session against a
// model coordinator and gateway under random interleavings: fetches
// complete (or 409 once fenced) in any order, revokes race the gateway's
// fence, renewals, user polls and commits, hooks. Between two stints of
// this member another holder reads a few records. Invariant: per
// partition, the records processed by everyone, in order, are exactly
// 0, 1, 2, ... (nothing lost, nothing repeated), every release commits the
// offset right after the last record processed, and committed offsets
// never move backwards.
func TestSimulatedHandoffsProcessEveryOffsetOnce(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 50
	}
	var stats simStats
	for seed := range seeds {
		sim := newSimulation(t, uint64(seed))
		sim.stats = &stats // after the join, which delivers nothing
		sim.run(600)
		sim.quiesce()
		sim.check()
	}
	t.Logf("%+v", stats)
	if stats.records == 0 || stats.releases == 0 || stats.fenced == 0 || stats.regrants == 0 || stats.renewals == 0 {
		t.Fatalf("simulation did not exercise every path: %+v", stats)
	}
}

type modelPartition struct {
	epoch       uint64 // the fence
	holder      bool   // the session holds it (owned or revoking)
	revoking    bool
	holderEpoch uint64
	committed   int64
	renewals    int
}

type simulation struct {
	t    *testing.T
	seed uint64
	rng  *rand.Rand
	s    *Session
	now  time.Time

	model    map[Partition]*modelPartition
	capEpoch map[string]uint64
	stream   map[Partition][]int64 // processed by anyone, in order

	fetches  map[uint64]Fetch
	canceled map[uint64]bool
	commits  []Commit
	hooks    []uint64
	news     []api.HeartbeatResponse
	userBusy bool
	stats    *simStats
}

// simStats proves the runs exercised what they claim to.
type simStats struct {
	records, releases, fenced, regrants, renewals int
}

func newSimulation(t *testing.T, seed uint64) *simulation {
	cfg := testConfig()
	cfg.BufferMaxBytes = 60
	sim := &simulation{stats: &simStats{},
		t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, 7)), s: New(cfg), now: t0,
		model: map[Partition]*modelPartition{}, capEpoch: map[string]uint64{},
		stream: map[Partition][]int64{}, fetches: map[uint64]Fetch{}, canceled: map[uint64]bool{},
	}
	var grants []api.Grant
	for _, p := range []Partition{pA, pB, {"audit", 0}} {
		m := &modelPartition{epoch: 1, holder: true}
		sim.model[p] = m
		grants = append(grants, sim.grantOf(p, m))
	}
	sim.apply(sim.s.Step(Joined{Now: sim.now, Response: api.JoinResponse{MemberID: "m", MemberToken: "tok", Grants: grants}}))
	return sim
}

func (sim *simulation) fatalf(format string, args ...any) {
	sim.t.Helper()
	sim.t.Fatalf("seed %d: %s", sim.seed, fmt.Sprintf(format, args...))
}

func (sim *simulation) grantOf(p Partition, m *modelPartition) api.Grant {
	capability := fmt.Sprintf("cap-%s-e%d-r%d", p, m.epoch, m.renewals)
	sim.capEpoch[capability] = m.epoch
	return grant(p, m.epoch, m.committed, capability, sim.now.Add(time.Hour))
}

func (sim *simulation) apply(acts []Action) {
	for _, a := range acts {
		switch a := a.(type) {
		case Fetch:
			sim.fetches[a.ID] = a
		case CancelFetch:
			sim.canceled[a.ID] = true
		case Deliver:
			for _, b := range a.Batches {
				sim.stream[b.Partition] = append(sim.stream[b.Partition], b.Payload.([]int64)...)
				sim.stats.records += b.Records
			}
		case Commit:
			sim.commits = append(sim.commits, a)
		case CommitResult:
			sim.userBusy = false
		case CallRevoke:
			if a.Lost {
				sim.fatalf("partitions lost: %v", a.Partitions)
			}
			sim.hooks = append(sim.hooks, a.ID)
		case Rejoin:
			sim.fatalf("rejoin asked")
		}
	}
}

func (sim *simulation) step(e Event) { sim.apply(sim.s.Step(e)) }

func (sim *simulation) run(steps int) {
	for range steps {
		sim.now = sim.now.Add(time.Millisecond)
		switch sim.rng.IntN(10) {
		case 0, 1, 2:
			sim.completeFetch()
		case 3:
			sim.step(Polled{Now: sim.now, MaxRecords: 1 + sim.rng.IntN(5)})
		case 4:
			if !sim.userBusy {
				sim.userBusy = true
				sim.step(CommitRequested{Now: sim.now, Ticket: 1})
			}
		case 5:
			sim.completeCommit()
		case 6:
			sim.completeHook()
		case 7:
			sim.coordinatorMoves()
		case 8, 9:
			sim.deliverNews()
		}
	}
}

func (sim *simulation) completeFetch() {
	if len(sim.fetches) == 0 {
		return
	}
	ids := sim.fetchIDs()
	id := ids[sim.rng.IntN(len(ids))]
	f := sim.fetches[id]
	delete(sim.fetches, id)
	if sim.canceled[id] && sim.rng.IntN(2) == 0 {
		sim.step(FetchDone{Now: sim.now, ID: id, Partition: f.Partition, Canceled: true})
		return
	}
	if m := sim.model[f.Partition]; f.Epoch < m.epoch {
		sim.stats.fenced++
		sim.step(FetchDone{Now: sim.now, ID: id, Partition: f.Partition, Code: api.CodeCapabilityRevoked})
		return
	}
	n := sim.rng.IntN(4)
	offsets := make([]int64, n)
	for i := range offsets {
		offsets[i] = f.Offset + int64(i)
	}
	sim.step(FetchDone{Now: sim.now, ID: id, Partition: f.Partition, Records: n, Bytes: int64(10 * n), Next: f.Offset + int64(n), Payload: offsets})
}

func (sim *simulation) completeCommit() {
	if len(sim.commits) == 0 {
		return
	}
	i := sim.rng.IntN(len(sim.commits))
	c := sim.commits[i]
	sim.commits = append(sim.commits[:i], sim.commits[i+1:]...)
	code := sim.coordinatorCommit(c)
	sim.step(CommitDone{Now: sim.now, ID: c.ID, Code: code})
}

// coordinatorCommit applies the commit rules of DESIGN §4, all or nothing.
func (sim *simulation) coordinatorCommit(c Commit) api.Code {
	for _, o := range c.Offsets {
		m := sim.model[Partition{o.Topic, o.Partition}]
		epoch := sim.capEpoch[o.Capability]
		owned := m.holder && !m.revoking && epoch == m.epoch
		if !owned && !(m.revoking && epoch == m.holderEpoch) {
			return api.CodeStaleEpoch
		}
		if o.Offset >= 0 && o.Offset < m.committed {
			sim.fatalf("commit %s/%d at %d below committed %d", o.Topic, o.Partition, o.Offset, m.committed)
		}
	}
	for _, o := range c.Offsets {
		p := Partition{o.Topic, o.Partition}
		m := sim.model[p]
		if o.Offset >= 0 {
			m.committed = o.Offset
		}
		if c.Release && m.revoking {
			if got := int64(len(sim.stream[p])); o.Offset != got {
				sim.fatalf("%s released at %d, but %d records were processed", p, o.Offset, got)
			}
			m.holder, m.revoking = false, false
			sim.stats.releases++
		}
	}
	return ""
}

func (sim *simulation) completeHook() {
	if len(sim.hooks) == 0 {
		return
	}
	i := sim.rng.IntN(len(sim.hooks))
	id := sim.hooks[i]
	sim.hooks = append(sim.hooks[:i], sim.hooks[i+1:]...)
	sim.step(HookDone{Now: sim.now, ID: id})
}

// coordinatorMoves revokes, renews or hands back one random partition.
func (sim *simulation) coordinatorMoves() {
	ids := sim.partitions()
	p := ids[sim.rng.IntN(len(ids))]
	m := sim.model[p]
	switch {
	case m.holder && !m.revoking && sim.rng.IntN(2) == 0:
		m.renewals++
		sim.stats.renewals++
		sim.news = append(sim.news, api.HeartbeatResponse{Renew: []api.Grant{sim.grantOf(p, m)}})
	case m.holder && !m.revoking:
		// Fence first (gateways 409 at once), tell the member in parallel.
		m.revoking, m.holderEpoch = true, m.epoch
		m.epoch++
		sim.news = append(sim.news, api.HeartbeatResponse{Revoke: []api.PartitionRef{{Topic: p.Topic, Partition: p.Partition, Epoch: m.holderEpoch}}})
	case !m.holder:
		// Another holder reads a few records, commits, releases; it comes back.
		for range sim.rng.IntN(4) {
			sim.stream[p] = append(sim.stream[p], m.committed)
			m.committed++
		}
		m.epoch += 2
		m.holder = true
		sim.stats.regrants++
		sim.news = append(sim.news, api.HeartbeatResponse{Grants: []api.Grant{sim.grantOf(p, m)}})
	}
}

func (sim *simulation) deliverNews() {
	if len(sim.news) == 0 {
		return
	}
	n := sim.news[0]
	sim.news = sim.news[1:]
	sim.step(NewsArrived{Now: sim.now, Incarnation: sim.s.Member().Incarnation, News: n})
}

// quiesce lets everything in flight finish, the user polling, until only
// long polls of partitions still held remain.
func (sim *simulation) quiesce() {
	for range 10000 {
		before := len(sim.news) + len(sim.hooks) + len(sim.commits) + len(sim.fetches)
		sim.deliverNews()
		sim.completeHook()
		sim.completeCommit()
		for _, id := range sim.fetchIDs() {
			f := sim.fetches[id]
			if sim.canceled[id] || f.Epoch < sim.model[f.Partition].epoch {
				delete(sim.fetches, id)
				sim.step(FetchDone{Now: sim.now, ID: id, Partition: f.Partition, Code: api.CodeCapabilityRevoked})
			}
		}
		sim.step(Polled{Now: sim.now})
		after := len(sim.news) + len(sim.hooks) + len(sim.commits) + len(sim.fetches)
		if before == after && len(sim.news)+len(sim.hooks)+len(sim.commits) == 0 {
			return
		}
	}
	sim.fatalf("did not quiesce")
}

func (sim *simulation) check() {
	for p, got := range sim.stream {
		for i, off := range got {
			if off != int64(i) {
				sim.fatalf("%s: processed stream %v: position %d holds offset %d (lost or repeated)", p, got, i, off)
			}
		}
	}
}

func (sim *simulation) fetchIDs() []uint64 {
	ids := make([]uint64, 0, len(sim.fetches))
	for id := range sim.fetches {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (sim *simulation) partitions() []Partition {
	ids := make([]Partition, 0, len(sim.model))
	for id := range sim.model {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, comparePartitions)
	return ids
}
