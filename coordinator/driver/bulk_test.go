package driver_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/coordinator/driver"
	"github.com/capgate/capgate/coordinator/group"
	"github.com/capgate/capgate/store"
)

// bulkFlow drives one coordinator (machine, driver, store) through a bulk
// handoff's steps, and can be killed and restarted between any two.
type bulkFlow struct {
	t        *testing.T
	st       crashable
	m        *group.Machine
	d        *driver.Driver
	counting *countingStore
	obs      *persisted
	got      map[group.Ref]group.Message
	seq      uint64 // the gateway's sync sequence
	member   string // the member holding the partitions
	ownKeys  bool   // the old layout: records are not counted
}

func bulkConfig() group.Config {
	cfg := group.DefaultConfig()
	cfg.InitialAssignDelay = 0
	cfg.Limits.EmptyGroupTTL = 11 * time.Minute
	return cfg
}

func newBulkFlow(t *testing.T, st crashable, runMin int) *bulkFlow {
	m, err := group.New(bulkConfig(), rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	f := &bulkFlow{t: t, st: st, m: m, obs: &persisted{parts: map[string]group.PartitionRecord{}}, got: map[group.Ref]group.Message{}}
	f.counting = &countingStore{update: st.update}
	f.d = driver.New(m, f.counting, f.obs, driver.Restored{})
	f.d.SetUnownedRunMin(runMin)
	f.ownKeys = runMin > bulkPartitions
	return f
}

// restart kills the coordinator and starts another on what it left,
// as a restart (badger) or a takeover (Kafka log) does; the persisted
// partitions carry over. It returns what the new one loaded.
func (f *bulkFlow) restart() *store.Snapshot {
	t := f.t
	t.Helper()
	next := f.st.restart(t)
	snap, err := next.Load()
	if err != nil {
		t.Fatal(err)
	}
	restored := restartedMatches(t, snap, f.obs)
	m, err := group.Restore(bulkConfig(), rand.New(rand.NewPCG(5, 6)), restored.Snapshot, t0)
	if err != nil {
		t.Fatal(err)
	}
	f.st.update = next.Update
	f.counting = &countingStore{update: next.Update}
	f.m = m
	f.d = driver.New(m, f.counting, f.obs, restored)
	return snap
}

func (f *bulkFlow) submit(ev func(group.Ref) group.Event) group.Ref {
	return f.d.Submit(ev, func(msg group.Message) { f.got[msg.Request()] = msg })
}

func (f *bulkFlow) flush() {
	f.t.Helper()
	if err := f.d.Flush(t0); err != nil {
		f.t.Fatal(err)
	}
}

// sync has the gateway poll until it has acked everything: a poll
// after seq acks seq and brings what came since (or a reset), or is held
// when nothing came (answered by a later step, unread).
func (f *bulkFlow) sync() {
	f.t.Helper()
	for range 4 {
		poll := f.submit(func(ref group.Ref) group.Event {
			return group.SyncPoll{Ref: ref, Gateway: "gw", After: f.seq, Wait: time.Second}
		})
		f.flush()
		r, answered := f.got[poll].(group.SyncReply)
		if !answered {
			return
		}
		f.seq = r.Seq
	}
	f.t.Fatal("the gateway's polls never caught up")
}

func (f *bulkFlow) join() {
	f.t.Helper()
	ref := f.submit(func(ref group.Ref) group.Event { return group.Join{Ref: ref, Group: "g", Topics: []string{"bulk"}} })
	f.flush()
	r, ok := f.got[ref].(group.JoinReply)
	if !ok || len(r.Grants) != bulkPartitions {
		f.t.Fatalf("join answered %#v, want %d grants", f.got[ref], bulkPartitions)
	}
	f.member = r.MemberID
}

func (f *bulkFlow) revokeMember() {
	f.t.Helper()
	ref := f.submit(func(ref group.Ref) group.Event {
		return group.RevokeMember{Ref: ref, Group: "g", MemberID: f.member}
	})
	f.flush()
	if r, ok := f.got[ref].(group.RevokeMemberReply); !ok || r.Fenced < bulkPartitions-1 {
		f.t.Fatalf("revoke answered %#v", f.got[ref])
	}
}

// want checks how many partitions are in a state, and that the step's
// persist wrote at most records records (bulk blocks, not one per
// partition).
func (f *bulkFlow) want(step string, state group.PartitionState, n, records int) {
	f.t.Helper()
	if got := countStates(f.obs.parts)[state]; got != n {
		f.t.Fatalf("after the %s: %d partitions %s, want %d (%v)", step, got, state, n, countStates(f.obs.parts))
	}
	if records > 0 && !f.ownKeys && f.counting.last > records {
		f.t.Errorf("the %s of %d partitions wrote %d records, want at most %d", step, bulkPartitions, f.counting.last, records)
	}
}

// bulkSteps is a bulk handoff and what follows it; each step ends with a
// persist a coordinator can be killed after.
var bulkSteps = []struct {
	name string
	run  func(f *bulkFlow)
}{
	{"first grant", func(f *bulkFlow) {
		f.d.Submit(func(group.Ref) group.Event { return group.Topics{Partitions: map[string]int32{"bulk": bulkPartitions}} }, nil)
		f.sync()
		f.join()
		f.want("first grant", group.Owned, bulkPartitions, 16)
	}},
	{"fence", func(f *bulkFlow) {
		f.revokeMember()
		f.want("fence", group.Revoking, bulkPartitions, 10)
	}},
	{"completion", func(f *bulkFlow) {
		f.sync()
		f.want("completion", group.Unowned, bulkPartitions, 10)
	}},
	{"regrant", func(f *bulkFlow) {
		f.join()
		f.want("regrant", group.Owned, bulkPartitions, 16)
	}},
	{"single revoke", func(f *bulkFlow) { // on its own keys: below the run
		f.submit(func(ref group.Ref) group.Event {
			return group.RevokePartition{Ref: ref, Group: "g", Topic: "bulk", Partition: 7, Reason: "test"}
		})
		f.flush()
		f.sync()
		f.want("single revoke", group.Revoking, 1, 0) // its holder has not released it
	}},
	{"second fence", func(f *bulkFlow) {
		f.revokeMember()
		// partition 7 revoking too, or unowned already (its own handoff
		// was fenced before; the machine's choice, not the store's)
		n := countStates(f.obs.parts)
		if n[group.Revoking] < bulkPartitions-1 || n[group.Revoking]+n[group.Unowned] != bulkPartitions {
			f.t.Fatalf("after the second fence: %v, want every partition revoking (or partition 7 unowned)", n)
		}
		if f.counting.last > 10 {
			f.t.Errorf("the second fence wrote %d records, want at most 10", f.counting.last)
		}
		f.sync()
		f.want("second completion", group.Unowned, bulkPartitions, 10)
	}},
	{"reap", func(f *bulkFlow) {
		for i := 0; len(f.obs.parts) > 0; i++ {
			next, ok := f.m.NextDeadline()
			if i == 100 || !ok {
				f.t.Fatalf("the empty group was not reaped: %d partitions left", len(f.obs.parts))
			}
			if err := f.d.Tick(next); err != nil {
				f.t.Fatal(err)
			}
		}
	}},
}

// TestBulkFenceIsCompactAndRestoresExactly: a member holding 4,200
// partitions is revoked while a gateway is known; the fence (every
// partition revoking at a new epoch), the completion, the regrant and
// the first grant before them each write a handful of records (bulk
// blocks, bulk.go), not one or two per partition. A coordinator killed
// after any step restores exactly the partitions persisted — on badger
// and on the Kafka log — and the one that restarts carries on through
// the remaining steps (a partition moved on its own keys, a second bulk
// fence, the reap), killed again at the end, restoring exactly again.
// Epochs only rise across all of it (the machine's restore and the
// store's checks would refuse otherwise; restartedMatches compares
// them); the reap leaves no block behind.
func TestBulkFenceIsCompactAndRestoresExactly(t *testing.T) {
	backends := map[string]func(*testing.T) crashable{"badger": badgerCrashable, "kafka": kafkaCrashable}
	for _, name := range []string{"badger", "kafka"} {
		for kill := range bulkSteps {
			t.Run(fmt.Sprintf("%s/killed after the %s", name, bulkSteps[kill].name), func(t *testing.T) {
				f := newBulkFlow(t, backends[name](t), 64)
				epochs := map[string]uint64{}
				for i, step := range bulkSteps {
					step.run(f)
					checkEpochsRise(t, f.obs, epochs)
					if i == kill {
						f.restart()
					}
				}
				snap := f.restart()
				for name := range snap.Meta {
					if strings.HasPrefix(name, "coordinator.bulk/") || strings.HasPrefix(name, "coordinator.unowned/") {
						t.Errorf("%s left in the store after its group was reaped", name)
					}
				}
				if snap.Layout != store.LayoutBulkBlocks {
					t.Errorf("store layout %d after bulk blocks, want %d", snap.Layout, store.LayoutBulkBlocks)
				}
			})
		}
	}
}

// checkEpochsRise fails when a persisted partition's epoch went down.
func checkEpochsRise(t *testing.T, obs *persisted, last map[string]uint64) {
	t.Helper()
	for k, r := range obs.parts {
		if r.Epoch < last[k] {
			t.Fatalf("%s: epoch %d after %d", k, r.Epoch, last[k])
		}
		last[k] = r.Epoch
	}
}

// TestStoreOfTheOldLayoutIsMigrated: a store written by a build without
// bulk blocks (every partition on its own keys, layout 1: a driver whose
// run threshold no Ready reaches writes exactly that) is read whole by
// this build, which writes bulk blocks from then on, raises the layout
// to 2 with the first (a build reading only 1 refuses it from then on,
// store.TestLayoutFromTheFutureIsRefused), and restores exactly after
// each step — on badger and on the Kafka log.
func TestStoreOfTheOldLayoutIsMigrated(t *testing.T) {
	backends := map[string]func(*testing.T) crashable{"badger": badgerCrashable, "kafka": kafkaCrashable}
	for _, name := range []string{"badger", "kafka"} {
		t.Run(name, func(t *testing.T) {
			f := newBulkFlow(t, backends[name](t), 1<<30)
			bulkSteps[0].run(f) // the first grant, on own keys
			f.revokeMember()    // a fence, on own keys
			f.want("old build's fence", group.Revoking, bulkPartitions, 0)
			if f.counting.last < 2*bulkPartitions {
				t.Fatalf("the old layout's fence wrote %d records, want one epoch and one state per partition", f.counting.last)
			}
			snap := f.restart()
			f.ownKeys = false // this build from here on
			if snap.Layout != 1 || hasBlocks(snap) {
				t.Fatalf("the old build's store: layout %d, blocks %v; want layout 1 and none", snap.Layout, hasBlocks(snap))
			}
			for _, step := range bulkSteps[2:5] { // completion, regrant, single revoke
				step.run(f)
				f.restart()
			}
			bulkSteps[5].run(f) // a second fence and its completion, in bulk
			if snap := f.restart(); snap.Layout != store.LayoutBulkBlocks || !hasBlocks(snap) {
				t.Fatalf("after bulk writes: layout %d, blocks %v; want layout %d and blocks", snap.Layout, hasBlocks(snap), store.LayoutBulkBlocks)
			}
		})
	}
}

func hasBlocks(snap *store.Snapshot) bool {
	for name := range snap.Meta {
		if strings.HasPrefix(name, "coordinator.bulk/") {
			return true
		}
	}
	return false
}

// TestOwnWriteAtTheBulkEntrysEpochWins (review27): a partition fenced in
// bulk (revoking at epoch E, its entry in a bulk block) whose handoff
// then ends on its own — its holder released it alone, so the Ready
// writes it on its own keys at the same epoch E — restores as that own
// write says, not as the bulk entry: an entry holds only while its epoch
// is above the own key's (bulk.go), and the own key is the later write.
// No other test has a partition written on its own keys at its bulk
// entry's epoch: restoring the entry when its epoch equals the own one
// ('>=' in restoreGroup) passed the package's tests.
func TestOwnWriteAtTheBulkEntrysEpochWins(t *testing.T) {
	backends := map[string]func(*testing.T) crashable{"badger": badgerCrashable, "kafka": kafkaCrashable}
	for _, name := range []string{"badger", "kafka"} {
		t.Run(name, func(t *testing.T) {
			f := newBulkFlow(t, backends[name](t), 64)
			bulkSteps[0].run(f) // every partition owned by the first member, in bulk
			first := f.member
			f.submit(func(ref group.Ref) group.Event { return group.Join{Ref: ref, Group: "g", Topics: []string{"bulk"}} })
			f.flush()
			f.sync()
			revoking := countStates(f.obs.parts)[group.Revoking]
			if revoking < 64 {
				t.Fatalf("the second member's join fenced %d partitions, want a bulk run (%v)", revoking, countStates(f.obs.parts))
			}
			var fenced group.PartitionRecord
			for _, r := range f.obs.parts {
				if r.State == group.Revoking && r.Holder == first && (fenced.Topic == "" || r.Partition < fenced.Partition) {
					fenced = r
				}
			}
			ref := f.submit(func(ref group.Ref) group.Event {
				return group.Commit{Ref: ref, Group: "g", MemberID: first, Release: true,
					Offsets: []group.CommitOffset{{Topic: "bulk", Partition: fenced.Partition, Epoch: fenced.HolderEpoch, Offset: -1}}}
			})
			f.flush()
			if _, ok := f.got[ref].(group.CommitReply); !ok {
				t.Fatalf("the release of partition %d answered %#v", fenced.Partition, f.got[ref])
			}
			f.sync()
			after := f.obs.parts[fmt.Sprintf("g/bulk/%d", fenced.Partition)]
			if after.Epoch != fenced.Epoch || (after.State == group.Revoking && !after.Released) {
				t.Fatalf("partition %d after its release: %+v, want its handoff moved on at epoch %d", fenced.Partition, after, fenced.Epoch)
			}
			if n := countStates(f.obs.parts)[group.Revoking]; n != revoking-1 {
				t.Fatalf("%d partitions revoking after one was released, want %d: the release was not written alone", n, revoking-1)
			}
			f.restart() // restartedMatches: restored exactly as persisted
		})
	}
}

// TestReapOfBulkOnlyPartitionsBelowTheFloor (review27): partitions whose
// only epoch is a bulk entry (a first grant, a fence and its completion
// written in bulk) are reaped after the epoch floor rose above their
// entries' epoch — another group's partition, moved on its own keys
// until its epoch passed theirs, reaped first in the same Ready.
// forgetBulk put each entry's epoch on the partition's own key before
// forgetting it, and the store refuses a new partition's epoch below the
// floor: the reap's persist failed and the coordinator with it, at
// every restart too (the reap comes back).
func TestReapOfBulkOnlyPartitionsBelowTheFloor(t *testing.T) {
	backends := map[string]func(*testing.T) crashable{"badger": badgerCrashable, "kafka": kafkaCrashable}
	for _, name := range []string{"badger", "kafka"} {
		t.Run(name, func(t *testing.T) {
			f := newBulkFlow(t, backends[name](t), 64)
			f.d.Submit(func(group.Ref) group.Event {
				return group.Topics{Partitions: map[string]int32{"bulk": bulkPartitions, "small": 1}}
			}, nil)
			f.sync()
			f.join() // every partition of g's topic owned, its epoch in a bulk block only
			// Group "a" (reaped before "g"): its one partition, on its own
			// keys, granted and left again until its epoch is well above g's.
			for range 4 {
				ref := f.submit(func(ref group.Ref) group.Event { return group.Join{Ref: ref, Group: "a", Topics: []string{"small"}} })
				f.flush()
				r, ok := f.got[ref].(group.JoinReply)
				if !ok || len(r.Grants) != 1 {
					t.Fatalf("join of group a answered %#v", f.got[ref])
				}
				ref = f.submit(func(ref group.Ref) group.Event { return group.Leave{Ref: ref, Group: "a", MemberID: r.MemberID} })
				f.flush()
				f.sync()
			}
			small := f.obs.parts["a/small/0"]
			big := f.obs.parts["g/bulk/0"]
			if small.Epoch <= big.Epoch+1 {
				t.Fatalf("group a's partition at epoch %d, g's at %d: want a's well above", small.Epoch, big.Epoch)
			}
			bulkSteps[6].run(f) // g's member expires (a fence, a completion: in bulk), both groups are reaped
			if snap := f.restart(); hasBlocks(snap) {
				t.Errorf("bulk blocks left after the reap")
			}
		})
	}
}
