package bench

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// scaleParams: Members raw HTTP members join one group of Partitions
// partitions, Joiners joins in flight at once; then every member
// heartbeats back to back for HeartbeatFor.
type scaleParams struct {
	Members, Partitions int
	Joiners             int
	HeartbeatFor        time.Duration
	Timeout             time.Duration
	// SettleHeap waits for earlier stacks of the process to be garbage
	// before the heap is measured (up to 11 s; see waitReleased).
	SettleHeap bool
}

// scaleResult is what the coordinator did with the crowd.
type scaleResult struct {
	Members, Partitions int
	// JoinedAll: from the first join sent until every join answered.
	JoinedAll time.Duration
	// Stable: from the first join sent until every partition was granted,
	// evenly, with no revoke outstanding (as the members saw it).
	Stable time.Duration
	// Heartbeats/s with wait_ms=1 from every member at once, and GET
	// /healthz/s at the same concurrency (HTTP only).
	Heartbeats, Healthz float64
	// Live heap (after GC) before the members joined and once stable, and
	// the capabilities the members themselves keep (part of it: the
	// members share the process with the coordinator).
	HeapBefore, HeapStable uint64
	ClientCapabilityBytes  int
	// LateReleases: release commits refused 409 because handoff_timeout
	// had already moved the partition.
	LateReleases int64
	// Refused: member requests answered 429 (a tenant bound) and sent
	// again after their Retry-After, as the SDK does.
	Refused int64
}

const scaleTopic = "scale"

func runScale(tb testing.TB, p scaleParams) scaleResult {
	tb.Helper()
	if p.SettleHeap {
		waitReleased()
	}
	// Every member is on loopback here, where a real fleet comes from as
	// many addresses: the one per-address bound that a crowd from one
	// address meets is raised; every other limit is the shipped default.
	s := startDeployment(tb, deploymentOptions{Topics: map[string]int32{scaleTopic: int32(p.Partitions)}, Gateways: 1,
		Coordinator: func(cfg *coordinator.Config) { cfg.MaxConnectionsPerAddress = 4 * p.Members }})
	defer s.close(tb)
	const group = "scale-g"
	credential := s.credential(tb, group)
	hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 4 * p.Members, MaxIdleConns: 4 * p.Members}}
	defer hc.CloseIdleConnections()
	r := scaleResult{Members: p.Members, Partitions: p.Partitions, HeapBefore: heapLive()}
	w := newScaleWatch(p.Members, p.Partitions)
	ctx, cancel := context.WithCancel(context.Background())
	var loops sync.WaitGroup
	defer func() { cancel(); loops.Wait() }()
	stopProfile := profilePhase(tb, "scale-join")
	start := time.Now()
	members := joinAll(tb, ctx, hc, s.CoordinatorURL(), group, credential, p, func(m *rawMember) {
		w.update(m)
		loops.Add(1)
		go func() {
			defer loops.Done()
			if err := m.loop(ctx, 3000, func(m *rawMember, _ api.HeartbeatResponse) { w.update(m) }); err != nil {
				w.failed(err)
			}
		}()
	})
	r.JoinedAll = time.Since(start)
	stableAt, ok := w.wait(p.Timeout)
	if !ok {
		tb.Fatalf("scale: not stable within %s: %s", p.Timeout, w)
	}
	if err := w.err(); err != nil {
		tb.Fatalf("scale: a member's heartbeat loop failed: %v", err)
	}
	r.Stable = stableAt.Sub(start)
	stopProfile()
	checkSettled(tb, s, group, p)
	r.HeapStable = heapLive()
	for _, m := range members {
		r.ClientCapabilityBytes += m.capabilityBytes()
		r.LateReleases += m.lateReleases.Load()
		r.Refused += m.refused.Load()
	}
	cancel()
	loops.Wait()
	r.Heartbeats = closedLoop(p.HeartbeatFor, members, func(m *rawMember) error {
		_, err := m.heartbeat(context.Background(), 1)
		return err
	})
	r.Healthz = closedLoop(p.HeartbeatFor, members, func(*rawMember) error {
		_, err := doJSON(context.Background(), hc, http.MethodGet, s.CoordinatorURL()+"/healthz", "", nil, nil)
		return err
	})
	return r
}

// joinAll joins p.Members members, p.Joiners at a time, calling started
// for each as soon as it joined.
func joinAll(tb testing.TB, ctx context.Context, hc *http.Client, url, group, credential string, p scaleParams, started func(*rawMember)) []*rawMember {
	members := make([]*rawMember, p.Members)
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	for range p.Joiners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < p.Members && failed.Load() == nil; i = int(next.Add(1)) - 1 {
				m, err := joinRaw(ctx, hc, url, group, scaleTopic, credential, 60_000)
				if err != nil {
					failed.Store(fmt.Errorf("join %d: %w", i, err))
					return
				}
				members[i] = m
				started(m)
			}
		}()
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		tb.Fatal(err)
	}
	return members
}

// checkSettled confirms with the admin API that every partition is owned
// by one of the members, none revoking or unowned.
func checkSettled(tb testing.TB, s *deployment, group string, p scaleParams) {
	var d coordinator.GroupDescription
	if _, err := s.admin(http.MethodGet, "/v1/admin/groups/"+group, nil, &d); err != nil {
		tb.Fatalf("describe: %v", err)
	}
	if len(d.Members) != p.Members || len(d.Partitions) != p.Partitions {
		tb.Fatalf("describe: %d members, %d partitions; want %d, %d", len(d.Members), len(d.Partitions), p.Members, p.Partitions)
	}
	for _, part := range d.Partitions {
		if part.State != "owned" {
			tb.Fatalf("describe: partition %d is %s once the members saw the group stable", part.Partition, part.State)
		}
	}
}

// scaleWatch follows how many partitions the members hold and notes when
// every partition was held, evenly. Safe for concurrent use.
type scaleWatch struct {
	members, partitions int
	mu                  sync.Mutex
	held                map[*rawMember]int
	total, even         int
	stableAt            time.Time
	stable              chan struct{}
	loopErr             error
}

// failed notes the first member loop that ended with an error.
func (w *scaleWatch) failed(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.loopErr == nil {
		w.loopErr = err
	}
}

func (w *scaleWatch) err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.loopErr
}

func newScaleWatch(members, partitions int) *scaleWatch {
	return &scaleWatch{members: members, partitions: partitions, held: map[*rawMember]int{}, stable: make(chan struct{})}
}

func (w *scaleWatch) update(m *rawMember) {
	n := m.held()
	w.mu.Lock()
	defer w.mu.Unlock()
	share := w.partitions / w.members
	old, known := w.held[m]
	w.total += n - old
	if known && old == share {
		w.even--
	}
	if n == share {
		w.even++
	}
	w.held[m] = n
	if w.stableAt.IsZero() && len(w.held) == w.members && w.total == w.partitions && w.even == w.members {
		w.stableAt = time.Now()
		close(w.stable)
	}
}

func (w *scaleWatch) wait(timeout time.Duration) (time.Time, bool) {
	select {
	case <-w.stable:
		return w.stableAt, true
	case <-time.After(timeout):
		return time.Time{}, false
	}
}

func (w *scaleWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return fmt.Sprintf("%d of %d members joined, %d of %d partitions held, %d members hold their share; first loop error: %v", len(w.held), w.members, w.total, w.partitions, w.even, w.loopErr)
}

// closedLoop has one goroutine per member call do back to back for d and
// returns the calls answered per second.
func closedLoop(d time.Duration, members []*rawMember, do func(*rawMember) error) float64 {
	var done atomic.Int64
	stop := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for _, m := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				if do(m) == nil {
					done.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return float64(done.Load()) / time.Since(start).Seconds()
}

// heapLive is the process's live heap (HeapAlloc right after a
// collection); HeapInuse would also count the fragmentation earlier
// benchmarks of the same process left behind.
func heapLive() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
