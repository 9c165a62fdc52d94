package store_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/store"
)

// outage holds every produce request of one shard's transactional id
// at the broker, unanswered, while it is on — the partition a leader cut
// off from Kafka is in: kgo's transactional producer then never fails the
// records it sent (it cannot know whether the broker has them). held is
// signalled per request held; release answers them all (processed
// normally, in order, before any later request), after which woke is
// closed.
type outage struct {
	on      atomic.Bool
	held    chan struct{}
	release chan struct{}
	woke    chan struct{}
	once    sync.Once
}

func cutOff(t *testing.T, opts store.KafkaOptions) *outage {
	t.Helper()
	o := &outage{held: make(chan struct{}, 16), release: make(chan struct{}), woke: make(chan struct{})}
	txnID := opts.TransactionalIDPrefix + "-shard-1"
	var done atomic.Bool
	cluster := kafkaCluster(t)
	cluster.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		if done.Load() {
			cluster.DropControl()
			return nil, nil, false
		}
		req := kreq.(*kmsg.ProduceRequest)
		if !o.on.Load() || req.TransactionID == nil || *req.TransactionID != txnID {
			return nil, nil, false
		}
		select {
		case o.held <- struct{}{}:
		default:
		}
		cluster.SleepControl(func() { <-o.release })
		o.once.Do(func() { close(o.woke) })
		return nil, nil, false
	})
	t.Cleanup(func() { done.Store(true); o.end() }) // before the stores' cleanups close them
	return o
}

func (o *outage) end() {
	select {
	case <-o.release:
	default:
		close(o.release)
	}
}

// A leader's write to a Kafka that does not answer returns by
// kafka_state.timeout (LogOptions.Timeout) and fails the writer; Close
// is then immediate. It waited for as long as Kafka was unreachable: kgo's
// transactional ProduceSync ignores its context for a request it sent
// (newuser2 #0a: a beat waited 4 minutes and SIGTERM with it).
func TestKafkaWriteReturnsByTheTimeoutWhenKafkaIsUnreachable(t *testing.T) {
	opts := kafkaOptions(t)
	opts.Timeout = time.Second
	st := openKafka(t, opts)
	putEpochs(t, st, 0, 1, 1)
	cut := cutOff(t, opts)
	cut.on.Store(true)

	start := time.Now()
	wrote := make(chan error, 1)
	go func() { wrote <- st.Update(func(w *store.Writer) error { return w.PutEpoch("g", "t", 0, 99) }) }()
	bound := opts.Timeout + 2*time.Second
	select {
	case err := <-wrote:
		took := time.Since(start)
		t.Logf("write to an unreachable Kafka returned after %s (timeout %s): %v", took, opts.Timeout, err)
		if !errors.Is(err, store.ErrBroken) {
			t.Fatalf("write: %v, want ErrBroken", err)
		}
	case <-time.After(bound):
		t.Fatalf("the write waits %s after its %s timeout, Kafka still unreachable", bound, opts.Timeout)
	}
	closed := time.Now()
	if err := st.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if took := time.Since(closed); took > 3*time.Second {
		t.Fatalf("close took %s", took)
	}
}

// Close cuts short a write in flight to an unreachable Kafka — it does
// not wait for its timeout — and fencing, not timing, keeps that write
// out of the log: the next writer fences the shard, and the deposed
// writer's request, answered only after the new writer committed, lands
// nothing — the log holds the new writer's state, never the old one's
// write, and the new writer goes on unfenced.
func TestKafkaCloseCutsShortAWriteAndTheNextWriterFencesIt(t *testing.T) {
	opts := kafkaOptions(t)
	opts.Timeout = 30 * time.Second // Close, not the timeout, must end the write
	opts.WriterID = "old"
	old, err := store.OpenKafka(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	putEpochs(t, old, 0, 1, 1)
	cut := cutOff(t, opts)
	cut.on.Store(true)
	wrote := make(chan error, 1)
	go func() { wrote <- old.Update(func(w *store.Writer) error { return w.PutEpoch("g", "t", 0, 99) }) }()
	select {
	case <-cut.held:
	case err := <-wrote:
		t.Fatalf("the write returned %v with Kafka unreachable", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the write never reached the broker")
	}

	start := time.Now()
	closed := make(chan error, 1)
	go func() { closed <- old.Close() }()
	select {
	case err := <-closed:
		t.Logf("close with a write in flight to an unreachable Kafka: %s", time.Since(start))
		if err != nil {
			t.Fatalf("close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("close waits for the write in flight (%s and counting)", time.Since(start))
	}
	if err := <-wrote; !errors.Is(err, store.ErrClosed) {
		t.Fatalf("the cut-short write: %v, want ErrClosed", err)
	}

	cut.on.Store(false) // Kafka is back, the old request still unanswered
	opts.WriterID = "new"
	taker := openKafka(t, opts) // fences the shard
	putEpochs(t, taker, 0, 1, 2)
	cut.end()
	<-cut.woke                   // the old request is answered before any later one
	putEpochs(t, taker, 0, 1, 3) // after it: the taker is not fenced
	if got := epochOf(t, openKafka(t, opts), "g", "t", 0); got != 3 {
		t.Fatalf("the log holds epoch %d, want the new writer's 3 (99: the deposed writer's write landed)", got)
	}
}

// A resignation is the writer's last commit: followers see it as such
// (Position.Resigned, naming no URL), every later write of the writer
// fails ErrClosed, and the next writer's first commit ends it.
func TestResignationIsTheWritersLastCommit(t *testing.T) {
	forEachLog(t, func(t *testing.T, env logEnv) {
		old := env.mustOpen(t, "old")
		if err := old.Beat("http://old"); err != nil {
			t.Fatal(err)
		}
		if err := old.Resign(context.Background()); err != nil {
			t.Fatalf("resign: %v", err)
		}
		if err := old.Beat("http://old"); !errors.Is(err, store.ErrClosed) {
			t.Fatalf("beat after the resignation: %v, want ErrClosed", err)
		}
		err := old.Update(func(w *store.Writer) error { return w.PutEpoch("g", "t", 0, 9) })
		if !errors.Is(err, store.ErrClosed) {
			t.Fatalf("update after the resignation: %v, want ErrClosed", err)
		}
		f := env.mustFollow(t, store.LogOptions{WriterID: "reader"})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := f.AwaitEnd(ctx); err != nil {
			t.Fatal(err)
		}
		if pos, _ := f.Position(); !pos.Resigned || pos.Writer != "old" || pos.Leader.URL != "" {
			t.Fatalf("follower position %+v, want old's resignation", pos)
		}
		if err := old.Close(); err != nil {
			t.Fatal(err)
		}
		next := env.mustOpen(t, "next")
		if err := next.Beat("http://next"); err != nil {
			t.Fatal(err)
		}
		if err := f.AwaitEnd(ctx); err != nil {
			t.Fatal(err)
		}
		if pos, _ := f.Position(); pos.Resigned || pos.Writer != "next" {
			t.Fatalf("follower position %+v after the next writer's beat", pos)
		}
	})
}
