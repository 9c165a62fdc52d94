package driver_test

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/capgate/capgate/coordinator/driver"
	"github.com/capgate/capgate/coordinator/group"
	"github.com/capgate/capgate/store"
)

// timedStore times each Update (staging and commit: the persist).
type timedStore struct {
	st   *store.Store
	last time.Duration
}

func (s *timedStore) Update(fn func(w *store.Writer) error) error {
	start := time.Now()
	err := s.st.Update(fn)
	s.last = time.Since(start)
	return err
}

// fenceBench is one coordinator (machine, driver, badger on disk) whose
// members are revoked while a gateway is known, so each revoke's Ready is
// the fence alone.
type fenceBench struct {
	d      *driver.Driver
	st     *timedStore
	got    map[group.Ref]group.Message
	groups int
	seq    uint64
}

func newFenceBench(b *testing.B, runMin int) *fenceBench {
	st, err := store.Open(filepath.Join(b.TempDir(), "store"), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	m, err := group.New(bulkConfig(), rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		b.Fatal(err)
	}
	f := &fenceBench{st: &timedStore{st: st}, got: map[group.Ref]group.Message{}}
	f.d = driver.New(m, f.st, &recorder{}, driver.Restored{})
	f.d.SetUnownedRunMin(runMin)
	f.d.Submit(func(group.Ref) group.Event {
		return group.Topics{Partitions: map[string]int32{"bulk": fencePartitions}}
	}, nil)
	poll := f.submit(func(ref group.Ref) group.Event { return group.SyncPoll{Ref: ref, Gateway: "gw"} })
	f.flush(b)
	f.seq = f.got[poll].(group.SyncReply).Seq
	return f
}

// ack has the gateway acknowledge everything: the handoffs complete
// (revoking → unowned), one persist, which it returns.
func (f *fenceBench) ack(b *testing.B) time.Duration {
	for range 2 {
		poll := f.submit(func(ref group.Ref) group.Event {
			return group.SyncPoll{Ref: ref, Gateway: "gw", After: f.seq, Wait: time.Second}
		})
		f.flush(b)
		r, ok := f.got[poll].(group.SyncReply)
		if !ok {
			break
		}
		f.seq = r.Seq
	}
	return f.st.last
}

const fencePartitions = 10_000

func (f *fenceBench) submit(ev func(group.Ref) group.Event) group.Ref {
	return f.d.Submit(ev, func(msg group.Message) { f.got[msg.Request()] = msg })
}

func (f *fenceBench) flush(b *testing.B) {
	if err := f.d.Flush(t0); err != nil {
		b.Fatal(err)
	}
}

// member joins a new group with a member holding every partition.
func (f *fenceBench) member(b *testing.B) (groupName, memberID string) {
	f.groups++
	groupName = fmt.Sprintf("g%d", f.groups)
	ref := f.submit(func(ref group.Ref) group.Event {
		return group.Join{Ref: ref, Group: groupName, Topics: []string{"bulk"}}
	})
	f.flush(b)
	r, ok := f.got[ref].(group.JoinReply)
	if !ok || len(r.Grants) != fencePartitions {
		b.Fatalf("join answered %#v", f.got[ref])
	}
	return groupName, r.MemberID
}

// fence revokes the member: the machine's step and the fence's persist.
func (f *fenceBench) fence(b *testing.B, groupName, memberID string) (flush, persist time.Duration) {
	ref := f.submit(func(ref group.Ref) group.Event {
		return group.RevokeMember{Ref: ref, Group: groupName, MemberID: memberID}
	})
	start := time.Now()
	f.flush(b)
	flush = time.Since(start)
	if r, ok := f.got[ref].(group.RevokeMemberReply); !ok || r.Fenced != fencePartitions {
		b.Fatalf("revoke answered %#v", f.got[ref])
	}
	return flush, f.st.last
}

// BenchmarkBulkFence: a member holding 10,000 partitions revoked while a
// gateway is known — the Flush that fences them (the machine's step, the
// Ready, the persist on badger, synchronous) — written as bulk blocks
// (bulk.go) and, in the same iteration on a second coordinator, on the
// partitions' own keys as before them (20,000 entries; the baseline: a run
// threshold no Ready reaches). Reports both, their persists, and the
// ratios (bulk / own keys).
func BenchmarkBulkFence(b *testing.B) {
	bulk, own := newFenceBench(b, 64), newFenceBench(b, 1<<30)
	var bulkFlush, bulkPersist, bulkDone, ownFlush, ownPersist, ownDone time.Duration
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		benches := []*fenceBench{bulk, own}
		if i%2 == 1 {
			benches[0], benches[1] = own, bulk // alternate who goes first
		}
		for _, f := range benches {
			g, m := f.member(b)
			b.StartTimer()
			flush, persist := f.fence(b, g, m)
			b.StopTimer()
			done := f.ack(b)
			if f == bulk {
				bulkFlush, bulkPersist, bulkDone = bulkFlush+flush, bulkPersist+persist, bulkDone+done
			} else {
				ownFlush, ownPersist, ownDone = ownFlush+flush, ownPersist+persist, ownDone+done
			}
		}
		b.StartTimer()
	}
	n := float64(b.N) * 1e6
	b.ReportMetric(float64(bulkFlush.Nanoseconds())/n, "bulk-fence-ms")
	b.ReportMetric(float64(bulkPersist.Nanoseconds())/n, "bulk-persist-ms")
	b.ReportMetric(float64(ownFlush.Nanoseconds())/n, "ownkeys-fence-ms")
	b.ReportMetric(float64(ownPersist.Nanoseconds())/n, "ownkeys-persist-ms")
	b.ReportMetric(float64(bulkDone.Nanoseconds())/n, "bulk-completion-ms")
	b.ReportMetric(float64(ownDone.Nanoseconds())/n, "ownkeys-completion-ms")
	b.ReportMetric(float64(bulkFlush)/float64(ownFlush), "fence-bulk/ownkeys")
	b.ReportMetric(float64(bulkPersist)/float64(ownPersist), "persist-bulk/ownkeys")
}
