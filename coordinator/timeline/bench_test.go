package timeline_test

import (
	"testing"
	"time"

	"github.com/capgate/capgate/coordinator/group"
	"github.com/capgate/capgate/coordinator/timeline"
)

// stubMachine answers the feed's two reads (a double for this benchmark).
type stubMachine struct{ gateways []group.GatewayDescription }

func (s stubMachine) Gateways() []group.GatewayDescription { return s.gateways }
func (s stubMachine) SyncSeq() uint64                      { return 1 }

// BenchmarkObserveHeartbeats is the loop-side cost of the console's hook
// on the heartbeat path: Observe of a Ready answering 256 heartbeats
// (News), with no subscriber and with a console watching (a subscriber
// drained by its own goroutine), same run. Per heartbeat: ns/op / 256.
func BenchmarkObserveHeartbeats(b *testing.B) {
	rd := group.Ready{}
	for i := range 256 {
		rd.Messages = append(rd.Messages, group.News{Ref: group.Ref(i + 1), Group: "g", MemberID: "m"})
	}
	withAndWithoutWatcher(b, func(b *testing.B, feed *timeline.Feed) {
		now := time.Unix(0, 0)
		for b.Loop() {
			feed.Observe(now, rd, stubMachine{})
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/256, "ns/heartbeat")
	})
}

// BenchmarkObserveHandoff: a Ready that fences 12 partitions (12 events
// published), with no subscriber and with one watching.
func BenchmarkObserveHandoff(b *testing.B) {
	withAndWithoutWatcher(b, func(b *testing.B, feed *timeline.Feed) {
		now := time.Unix(0, 0)
		epoch := uint64(0)
		m := stubMachine{gateways: []group.GatewayDescription{{ID: "gw1"}}}
		for b.Loop() {
			epoch++
			rd := group.Ready{}
			for p := range int32(12) {
				rd.Persist = append(rd.Persist, group.PartitionRecord{Group: "g", Topic: "t", Partition: p, Epoch: epoch,
					State: group.Revoking, Holder: "a", HolderEpoch: epoch - 1, Target: "b"})
			}
			feed.Observe(now, rd, m)
		}
	})
}

// withAndWithoutWatcher runs bench as sub-benchmarks "none" and
// "watching" (a subscriber drained by its own goroutine), each on a fresh
// feed.
func withAndWithoutWatcher(b *testing.B, bench func(*testing.B, *timeline.Feed)) {
	for _, watching := range []bool{false, true} {
		name := "none"
		if watching {
			name = "watching"
		}
		b.Run(name, func(b *testing.B) {
			feed := timeline.New(4096, 1)
			if watching {
				stop := drain(b, feed)
				defer stop()
			}
			bench(b, feed)
		})
	}
}

// drain reads feed in a goroutine, as a console stream does, until stop.
func drain(b *testing.B, feed *timeline.Feed) (stop func()) {
	sub, err := feed.Subscribe(feed.Last())
	if err != nil {
		b.Fatal(err)
	}
	done, quit := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		var buf []timeline.Event
		for {
			select {
			case <-quit:
				return
			case <-sub.Ready():
				buf, _ = sub.Read(buf[:0], 256)
			}
		}
	}()
	return func() { close(quit); <-done; sub.Close() }
}
