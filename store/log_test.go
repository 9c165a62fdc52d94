package store_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/capgate/capgate/store"
)

// Cases every log backend keeps — the Kafka log on kfake and its
// in-memory twin, with the same semantics: fencing, tailing, takeover,
// snapshots, failed writes.

// logEnv is one fresh shard of one log backend.
type logEnv struct {
	open   func(opts store.LogOptions) (*store.LogStore, error)
	follow func(opts store.LogOptions) (*store.Follower, error)
}

type logKind struct {
	name string
	env  func(t *testing.T) logEnv
}

func logKinds() []logKind {
	return []logKind{
		{"mem", func(t *testing.T) logEnv {
			log := store.NewMemLog()
			return logEnv{
				open: func(opts store.LogOptions) (*store.LogStore, error) {
					return store.OpenMem(context.Background(), log, store.MemOptions{LogOptions: opts})
				},
				follow: func(opts store.LogOptions) (*store.Follower, error) {
					return store.FollowMem(context.Background(), log, store.MemOptions{LogOptions: opts})
				},
			}
		}},
		{"kafka", func(t *testing.T) logEnv {
			kopts := kafkaOptions(t)
			with := func(opts store.LogOptions) store.KafkaOptions {
				k := kopts
				if opts.KEK == nil {
					opts.KEK = testKEK(t)
				}
				k.LogOptions = opts
				return k
			}
			return logEnv{
				open: func(opts store.LogOptions) (*store.LogStore, error) {
					return store.OpenKafka(context.Background(), with(opts))
				},
				follow: func(opts store.LogOptions) (*store.Follower, error) {
					return store.FollowKafka(context.Background(), with(opts))
				},
			}
		}},
	}
}

func forEachLog(t *testing.T, test func(t *testing.T, env logEnv)) {
	for _, kind := range logKinds() {
		t.Run(kind.name, func(t *testing.T) { test(t, kind.env(t)) })
	}
}

func (e logEnv) mustOpen(t *testing.T, writer string) *store.LogStore {
	t.Helper()
	st, err := e.open(store.LogOptions{WriterID: writer})
	if err != nil {
		t.Fatalf("open %s: %v", writer, err)
	}
	closeAtCleanup(t, st)
	return st
}

func (e logEnv) mustFollow(t *testing.T, opts store.LogOptions) *store.Follower {
	t.Helper()
	f, err := e.follow(opts)
	if err != nil {
		t.Fatalf("follow: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// putEpochs writes epoch e of partitions [from, to) of g/t in one batch.
func putEpochs(t *testing.T, st store.Backend, from, to int32, e uint64) {
	t.Helper()
	mustUpdate(t, st, func(w *store.Writer) error {
		for p := from; p < to; p++ {
			if err := w.PutEpoch("g", "t", p, e); err != nil {
				return err
			}
		}
		return nil
	})
}

// A takeover fences the previous writer: its next write fails with a
// typed fenced error, and so does every later one; nothing of its failed
// batches is visible to anyone; the new writer keeps writing (the deposed
// one never bumped the epoch back).
func TestDeposedWriterIsFenced(t *testing.T) {
	forEachLog(t, func(t *testing.T, env logEnv) {
		old := env.mustOpen(t, "old")
		putEpochs(t, old, 0, 2, 1)
		taker := env.mustOpen(t, "new")
		if got := epochOf(t, taker, "g", "t", 1); got != 1 {
			t.Fatalf("takeover read epoch %d, want 1 (it must read to the end)", got)
		}
		for i := range 3 {
			err := old.Update(func(w *store.Writer) error { return w.PutEpoch("g", "t", 0, uint64(10+i)) })
			var fenced *store.FencedError
			if !errors.Is(err, store.ErrFenced) || !errors.As(err, &fenced) {
				t.Fatalf("deposed write %d: err = %v, want a *FencedError", i, err)
			}
			if fenced.TransactionalID == "" || fenced.Log == "" {
				t.Fatalf("fenced error names nothing: %+v", fenced)
			}
		}
		if !old.Fenced() || taker.Fenced() {
			t.Fatalf("Fenced(): old %v, new %v", old.Fenced(), taker.Fenced())
		}
		putEpochs(t, taker, 0, 1, 2)
		for name, st := range map[string]store.Backend{"new writer": taker, "a fresh reader": env.mustOpen(t, "third")} {
			if got := epochOf(t, st, "g", "t", 0); got != 2 {
				t.Fatalf("%s sees epoch %d, want 2 (a fenced batch leaked?)", name, got)
			}
		}
	})
}

// Two writers race to open the same shard: each open fences the one
// before; exactly the last one opened can write.
func TestOnlyTheLastOpenedWriterWrites(t *testing.T) {
	forEachLog(t, func(t *testing.T, env logEnv) {
		var writers []*store.LogStore
		for i := range 4 {
			writers = append(writers, env.mustOpen(t, fmt.Sprint("w", i)))
		}
		for i, w := range writers {
			err := w.Update(func(w *store.Writer) error { return w.PutEpoch("g", "t", int32(i), 1) })
			if last := i == len(writers)-1; last != (err == nil) || (!last && !errors.Is(err, store.ErrFenced)) {
				t.Fatalf("writer %d: err = %v", i, err)
			}
		}
	})
}

// A follower applies each committed transaction whole as it appears, and
// its Load equals the writer's.
func TestFollowerTailsTheWriter(t *testing.T) {
	forEachLog(t, func(t *testing.T, env logEnv) {
		writer := env.mustOpen(t, "w")
		putEpochs(t, writer, 0, 5, 1)
		f := env.mustFollow(t, store.LogOptions{})
		for round := range uint64(5) {
			putEpochs(t, writer, 0, 5, round+2)
			want, _ := writer.Position()
			waitApplied(t, f, want.Offset)
			got, err := f.Load()
			if err != nil {
				t.Fatal(err)
			}
			if want := mustLoad(t, writer); !reflect.DeepEqual(got, want) {
				t.Fatalf("round %d: follower\n %+v\nwriter\n %+v", round, got, want)
			}
		}
		if pos, _ := f.Position(); pos.Writer != "w" {
			t.Fatalf("last commit by %q, want w", pos.Writer)
		}
	})
}

// waitApplied waits until f applied the commit at offset (no sleeping:
// the follower signals every commit).
func waitApplied(t testing.TB, f *store.Follower, offset int64) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		pos, changed := f.Position()
		if pos.Offset >= offset {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("follower at %d, writer at %d; err %v", pos.Offset, offset, f.Err())
		}
	}
}

// A warm follower takes over: fence, barrier, read to the end; it replays
// only the tail it had not read, and the writer it replaced is fenced.
func TestPromoteWarmFollower(t *testing.T) {
	forEachLog(t, func(t *testing.T, env logEnv) {
		writer := env.mustOpen(t, "leader")
		f := env.mustFollow(t, store.LogOptions{WriterID: "standby"})
		putEpochs(t, writer, 0, 100, 1)
		at, _ := writer.Position()
		waitApplied(t, f, at.Offset)
		before, _ := f.Position()
		putEpochs(t, writer, 0, 3, 2) // the tail the standby has not read yet
		want := mustLoad(t, writer)

		promoted, err := f.Promote(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		closeAtCleanup(t, promoted)
		if got := mustLoad(t, promoted); !reflect.DeepEqual(got, want) {
			t.Fatalf("promoted state\n %+v\nwant\n %+v", got, want)
		}
		after, _ := promoted.Position()
		if replayed := after.Commits - before.Commits; replayed > 3 { // the tail batch, the barrier, maybe the layout
			t.Fatalf("promotion replayed %d commits, want only the tail", replayed)
		}
		if err := writer.Update(func(w *store.Writer) error { return w.PutEpoch("g", "t", 0, 9) }); !errors.Is(err, store.ErrFenced) {
			t.Fatalf("old leader after takeover: %v, want ErrFenced", err)
		}
		putEpochs(t, promoted, 0, 1, 3)
		if _, err := f.Load(); !errors.Is(err, store.ErrClosed) {
			t.Fatalf("follower Load after Promote: %v, want ErrClosed", err)
		}
	})
}

// Snapshot + tail replay equals full replay, and a reader with a snapshot
// applies only the commits after it.
func TestSnapshotPlusTailEqualsFullReplay(t *testing.T) {
	forEachLog(t, func(t *testing.T, env logEnv) {
		writer := env.mustOpen(t, "w")
		writeEverything(t, writer)
		for e := uint64(1); e <= 20; e++ {
			putEpochs(t, writer, 0, 50, e)
		}
		mustUpdate(t, writer, func(w *store.Writer) error { return w.DeleteMember("g1", "a") })
		if err := writer.WriteSnapshot(context.Background()); err != nil {
			t.Fatal(err)
		}
		for e := uint64(21); e <= 25; e++ { // the tail
			putEpochs(t, writer, 0, 10, e)
		}
		mustUpdate(t, writer, func(w *store.Writer) error { return w.DeleteDenied("jti-1") })
		want := mustLoad(t, writer)
		end, _ := writer.Position()

		withSnapshot := env.mustFollow(t, store.LogOptions{})
		future := func() time.Time { return time.Now().Add(1000 * time.Hour) }
		full := env.mustFollow(t, store.LogOptions{SnapshotMaxAge: time.Hour, Now: future}) // snapshot too old: ignored
		for name, f := range map[string]*store.Follower{"snapshot+tail": withSnapshot, "full replay": full} {
			waitApplied(t, f, end.Offset)
			got, err := f.Load()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s:\n %+v\nwant\n %+v", name, got, want)
			}
		}
		tail, _ := withSnapshot.Position()
		all, _ := full.Position()
		if tail.Commits != 6 || all.Commits < 24 {
			t.Fatalf("commits applied: %d with the snapshot (want the 6 after it), %d without (want all)", tail.Commits, all.Commits)
		}
	})
}

// SnapshotEvery writes snapshots in the background; a restart then
// replays only what came after the last one.
func TestBackgroundSnapshots(t *testing.T) {
	forEachLog(t, func(t *testing.T, env logEnv) {
		writer, err := env.open(store.LogOptions{WriterID: "w", SnapshotEvery: 100})
		if err != nil {
			t.Fatal(err)
		}
		for e := uint64(1); e <= 5; e++ {
			putEpochs(t, writer, 0, 50, e) // 250 records: two snapshots start
		}
		want := mustLoad(t, writer)
		end, _ := writer.Position()
		if err := writer.Close(); err != nil { // waits for the snapshots
			t.Fatal(err)
		}
		f := env.mustFollow(t, store.LogOptions{})
		waitApplied(t, f, end.Offset)
		got, err := f.Load()
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("after restart\n %+v\nwant\n %+v", got, want)
		}
		// 6 commits in all (layout, 5 batches); the snapshot of 200 or more
		// records leaves at most 3 to replay.
		if pos, _ := f.Position(); pos.Commits > 3 {
			t.Fatalf("replayed %d commits after the snapshot", pos.Commits)
		}
	})
}

// A write whose transaction aborts (also when only the client says so), or
// whose commit answer is lost, leaves the backend refusing writes
// (ErrBroken); opening the log again learns what was really committed.
func TestFailedWriteBreaksTheWriter(t *testing.T) {
	for _, c := range []struct {
		fault     store.MemFault
		committed bool
	}{{store.MemAbort, false}, {store.MemLoseAnswer, true}, {store.MemClientAbort, false}} {
		t.Run(fmt.Sprint(c.fault), func(t *testing.T) {
			log := store.NewMemLog()
			open := func() *store.LogStore {
				st, err := store.OpenMem(context.Background(), log, store.MemOptions{})
				if err != nil {
					t.Fatal(err)
				}
				closeAtCleanup(t, st)
				return st
			}
			st := open()
			putEpochs(t, st, 0, 1, 1)
			log.Fail(0, c.fault)
			if err := st.Update(func(w *store.Writer) error { return w.PutEpoch("g", "t", 0, 2) }); !errors.Is(err, store.ErrBroken) {
				t.Fatalf("failed write: %v, want ErrBroken", err)
			}
			if err := st.Update(func(w *store.Writer) error { return w.PutEpoch("g", "t", 1, 1) }); !errors.Is(err, store.ErrBroken) {
				t.Fatalf("write after a failed one: %v, want ErrBroken", err)
			}
			want := uint64(1)
			if c.committed {
				want = 2
			}
			if got := epochOf(t, open(), "g", "t", 0); got != want {
				t.Fatalf("reopened epoch %d, want %d", got, want)
			}
		})
	}
}

// A takeover whose barrier the client itself aborted while answering its
// commit (kgo does, on a writer's first transaction: kafka.go) starts over
// with a new writer instead of waiting for a barrier that never comes; it
// gives up after silentAbortAttempts, leaving the log as it was.
func TestPromoteStartsOverWhenTheClientAbortsTheBarrier(t *testing.T) {
	log := store.NewMemLog()
	first, err := store.OpenMem(context.Background(), log, store.MemOptions{})
	if err != nil {
		t.Fatal(err)
	}
	putEpochs(t, first, 0, 1, 4)
	records := log.Len(0)

	log.Fail(0, store.MemClientAbort)
	log.Fail(0, store.MemClientAbort)
	st, err := store.OpenMem(context.Background(), log, store.MemOptions{})
	if err != nil {
		t.Fatalf("takeover after two client aborts of its barrier: %v", err)
	}
	if got := log.Len(0); got != records+1 {
		t.Fatalf("log grew by %d records, want exactly the one barrier that committed", got-records)
	}
	if got := epochOf(t, st, "g", "t", 0); got != 4 {
		t.Fatalf("epoch %d after the takeover, want 4", got)
	}
	if err := first.Update(func(w *store.Writer) error { return w.PutEpoch("g", "t", 0, 5) }); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("the writer taken over: %v, want ErrFenced", err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	for i := 0; i < 3; i++ {
		log.Fail(0, store.MemClientAbort)
	}
	if _, err := store.OpenMem(context.Background(), log, store.MemOptions{}); err == nil {
		t.Fatal("a takeover whose every barrier was aborted succeeded")
	}
	if got := log.Len(0); got != records+1 {
		t.Fatalf("a failed takeover appended %d records", got-records-1)
	}
}

// A fault armed for the next commit is consumed by the next attempt even
// when that attempt fails fenced: it never strikes the newer writer's
// transaction instead (the simulation arms faults for a writer that may
// already be deposed; a lost answer striking the new leader would commit
// what it believes failed).
func TestFencedAttemptConsumesTheFault(t *testing.T) {
	log := store.NewMemLog()
	old, err := store.OpenMem(context.Background(), log, store.MemOptions{})
	if err != nil {
		t.Fatal(err)
	}
	closeAtCleanup(t, old)
	next, err := store.OpenMem(context.Background(), log, store.MemOptions{}) // fences old
	if err != nil {
		t.Fatal(err)
	}
	closeAtCleanup(t, next)
	log.Fail(0, store.MemLoseAnswer)
	if err := old.Beat("http://old"); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("deposed writer's beat: %v, want ErrFenced", err)
	}
	if err := next.Update(func(w *store.Writer) error { return w.PutEpoch("g", "t", 0, 1) }); err != nil {
		t.Fatalf("the newer writer's write met the deposed one's fault: %v", err)
	}
}

// A manual follower on the in-memory log reads only when told (CatchUp),
// and promotes without a goroutine: what the deterministic simulation
// needs to decide when a standby reads.
func TestManualFollower(t *testing.T) {
	log := store.NewMemLog()
	writer, err := store.OpenMem(context.Background(), log, store.MemOptions{LogOptions: store.LogOptions{WriterID: "leader"}})
	if err != nil {
		t.Fatal(err)
	}
	closeAtCleanup(t, writer)
	putEpochs(t, writer, 0, 4, 1)
	f, err := store.FollowMem(context.Background(), log, store.MemOptions{LogOptions: store.LogOptions{WriterID: "standby"}, Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	putEpochs(t, writer, 0, 4, 2)
	if pos, _ := f.Position(); pos.Offset != -1 {
		t.Fatalf("a manual follower read on its own: at %d", pos.Offset)
	}
	if err := f.CatchUp(); err != nil {
		t.Fatal(err)
	}
	got, err := f.Load()
	if err != nil {
		t.Fatal(err)
	}
	if want := mustLoad(t, writer); !reflect.DeepEqual(got, want) {
		t.Fatalf("after CatchUp\n %+v\nwant\n %+v", got, want)
	}
	putEpochs(t, writer, 0, 1, 3) // the tail Promote must read itself
	promoted, err := f.Promote(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	closeAtCleanup(t, promoted)
	if epoch := epochOf(t, promoted, "g", "t", 0); epoch != 3 {
		t.Fatalf("promoted at epoch %d, want 3", epoch)
	}
	if err := writer.Update(func(w *store.Writer) error { return w.PutEpoch("g", "t", 0, 4) }); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("old writer: %v, want ErrFenced", err)
	}
	auto, err := store.FollowMem(context.Background(), log, store.MemOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer auto.Close()
	if err := auto.CatchUp(); err == nil {
		t.Fatal("CatchUp on a tailing follower")
	}
}
