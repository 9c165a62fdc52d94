package ha

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/harness"
)

// TestSlowStateLogCommitLands: every write of the replicas' state log
// takes 2.5 s (Kafka moving the log's leader: kfake holds each
// transactional Produce) while an SDK consumer commits, synchronously,
// with the SDK's request_timeout (10 s). With replicas a commit attempt
// silent past the driver's margin (1.5 s here) is at a frozen replica as
// far as the consumer can tell, and the next replica is asked; but this
// leader is alive, writing. The commit must be reported as what it is —
// accepted — and the offsets committed are the ones the coordinator
// holds. lease_timeout is raised above the writes (a follower takes over
// after that long without a commit: with the shipped 1 s a write this
// slow is a takeover, which TestStateLogLeaderMoves covers).
//
// Before, each attempt was given up at the margin and retried; the
// retry queued behind the write in flight and waited for a write of its
// own, so every attempt was given up, and Commit returned
// "request_timeout passed without an answer" for a commit that had
// landed with the first write.
func TestSlowStateLogCommitLands(t *testing.T) {
	t.Parallel()
	const group = "ha-slow-log-commit"
	const delay = 2500 * time.Millisecond
	c := startHA(t, group, nil, func(cfg *coordinator.Config) { cfg.Replica.LeaseTimeout = 10 * time.Second })
	var slow atomic.Bool
	holdLogWrites(c, delay, slow.Load)
	prod := c.StartProducer(t, produceEvery)
	defer prod.Stop()

	cfg := c.ConsumerConfig(t, harness.MemberOptions{Group: group, RequestTimeout: 10 * time.Second}).Client
	cfg.CommitInterval = 0 // only the commits below
	cons, err := client.NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		slow.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = cons.Close(ctx)
	})
	// Each step gets harness.Wait of its own: a loaded machine.
	step := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), harness.Wait)
		t.Cleanup(cancel)
		return ctx
	}
	if err := cons.Join(step()); err != nil {
		t.Fatal(err)
	}
	want := map[int32]int64{}
	poll := func() {
		t.Helper()
		recs, err := cons.Poll(step())
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			want[r.Partition] = max(want[r.Partition], r.Offset+1)
		}
	}
	for len(want) < int(c.Partitions()) {
		poll()
	}

	for round := range 3 {
		poll()
		slow.Store(true)
		start := time.Now()
		err := cons.Commit(step()) // every record polled so far
		took := time.Since(start)
		slow.Store(false)
		if err != nil {
			t.Errorf("round %d: commit failed after %s: %v", round, took.Round(time.Millisecond), err)
		}
		d, derr := c.Describe(group)
		if derr != nil {
			t.Fatal(derr)
		}
		for _, p := range d.Partitions {
			if p.Committed == nil || *p.Committed != want[p.Partition] {
				t.Errorf("round %d: partition %d committed %v, want %d", round, p.Partition, p.Committed, want[p.Partition])
			}
		}
		if err != nil {
			return // the offsets checked above: landed or not
		}
		t.Logf("round %d: commit accepted after %s", round, took.Round(time.Millisecond))
	}
}

// holdLogWrites makes kfake hold each write of the replicas' state log
// (a transactional Produce) for delay when hold, asked at each, says so.
func holdLogWrites(c *harness.Cluster, delay time.Duration, hold func() bool) {
	kc := c.Kafka.Cluster()
	kc.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		if req := kreq.(*kmsg.ProduceRequest); req.TransactionID != nil && hold() {
			timer := time.NewTimer(delay)
			kc.SleepControl(func() { <-timer.C })
		}
		return nil, nil, false
	})
}
