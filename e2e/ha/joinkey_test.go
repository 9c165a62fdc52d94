package ha

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/harness"
)

// TestJoinPastASlowLeaderLeavesNoOrphan: the leader's state-log write
// carrying a consumer's first join takes 6 s (kfake holds one
// transactional Produce), longer than the join margin (4 s: session
// 10 s, heartbeat_wait 1 s). The SDK gives the first attempt up and the
// retry reaches the same leader (through a standby's not_leader), which
// had stepped the first attempt anyway: it made a member. The retry
// carries the first attempt's Idempotency-Key, so the coordinator
// answers it with that member — the group never has a second member.
//
// Before, the retry made a second member and the first stayed — nobody
// heartbeat it — holding half the partitions until its session (10 s)
// ran out: every describe between showed two members, and the consumer
// got its half only after that.
func TestJoinPastASlowLeaderLeavesNoOrphan(t *testing.T) {
	t.Parallel()
	const group = "ha-slow-join"
	const delay = 6 * time.Second
	c := startHA(t, group, nil, func(cfg *coordinator.Config) {
		// No takeover while a write is held (TestStateLogLeaderMoves
		// covers that), and few beats to queue beside the join's write.
		cfg.Replica.LeaseTimeout, cfg.Replica.BeatInterval = 20*time.Second, 5*time.Second
	})
	var held atomic.Int32 // state-log writes still to hold
	holdLogWrites(c, delay, func() bool { return held.Add(-1) >= 0 })
	leaderAmong(t, c)

	cfg := c.ConsumerConfig(t, harness.MemberOptions{Group: group, SessionTimeout: 10 * time.Second, RequestTimeout: 12 * time.Second}).Client
	cons, err := client.NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = cons.Close(ctx)
	})

	// Every member id the group shows, from before the join until it
	// settled (a describe waits for the held write like the join).
	var mu sync.Mutex
	seen := map[string]bool{}
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if d, err := c.Describe(group); err == nil {
				mu.Lock()
				for _, m := range d.Members {
					seen[m.ID] = true
				}
				mu.Unlock()
			}
			time.Sleep(20 * time.Millisecond) // polling a real server, not waiting for an event
		}
	}()

	held.Store(1)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), harness.Wait)
	defer cancel()
	if err := cons.Join(ctx); err != nil {
		t.Fatalf("join past a slow leader: %v", err)
	}
	joined := time.Since(start)
	id := cons.MemberID()
	own := c.WaitSettled(t, group, 1)
	settled := time.Since(start)
	close(stop)
	<-watched
	t.Logf("joined as %s after %s (the first attempt given up at the margin), every partition its own after %s", id,
		joined.Round(time.Millisecond), settled.Round(time.Millisecond))
	if joined < delay-time.Second {
		t.Errorf("joined after %s: the held write (%s) did not hold the first attempt; the test proves nothing", joined, delay)
	}
	if len(own[id]) != int(c.Partitions()) {
		t.Errorf("settled with owners %v, want %s to own all", own, id)
	}
	mu.Lock()
	defer mu.Unlock()
	others := slices.Sorted(func(yield func(string) bool) {
		for m := range seen {
			if m != id && !yield(m) {
				return
			}
		}
	})
	if len(others) > 0 {
		t.Errorf("the group showed members %v besides the consumer's %s: a join attempt given up made a member nobody heartbeats", others, id)
	}
}
