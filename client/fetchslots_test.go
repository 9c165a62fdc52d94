package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client/session"
)

// slowGateway answers every fetch with no records once release is
// closed (or its client gave up), and counts the fetches it holds.
type slowGateway struct {
	*httptest.Server
	release        chan struct{}
	held, mostHeld atomic.Int32
	// holdOnly, if set, holds only the fetches whose path holds it; the
	// others are answered at once.
	holdOnly string
}

func newSlowGateway(t *testing.T, holdOnly string) *slowGateway {
	g := &slowGateway{release: make(chan struct{}), holdOnly: holdOnly}
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.holdOnly == "" || strings.Contains(r.URL.Path, g.holdOnly) {
			n := g.held.Add(1)
			for m := g.mostHeld.Load(); n > m && !g.mostHeld.CompareAndSwap(m, n); m = g.mostHeld.Load() {
			}
			select {
			case <-g.release:
			case <-r.Context().Done():
			}
			g.held.Add(-1)
		}
		w.Header().Set("Content-Type", api.MediaJSON)
		_, _ = w.Write([]byte(`{"records":[],"next_offset":0}`))
	}))
	t.Cleanup(g.Close)
	return g
}

func slotsFetcher(ctx context.Context, g *slowGateway, limit int) *fetcher {
	cfg := DefaultConfig()
	cfg.Gateways, cfg.GatewayFetchesMax, cfg.FetchAhead, cfg.Raw = []string{g.URL}, limit, false, false
	tr := &transport{http: newHTTPClient(nil, limit), backoff: backoff{base: cfg.RetryBackoff, max: cfg.RetryBackoffMax}}
	return ownFetcher(ctx, cfg, tr)
}

// TestFetchesToAGatewayAreBounded: at most GatewayFetchesMax fetches
// are in flight to one gateway (each a connection of its own); the
// others wait their turn and are answered once slots free. Before, a
// consumer sent one per partition at once: 2,000 partitions opened ~1,200
// connections to one gateway, and had thousands of fetches refused 429
// past the gateway's per-tenant limit.
func TestFetchesToAGatewayAreBounded(t *testing.T) {
	const limit, fetches = 3, 10
	g := newSlowGateway(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := slotsFetcher(ctx, g, limit)
	var wg sync.WaitGroup
	var started atomic.Int32
	errs := make(chan error, fetches)
	for i := range int32(fetches) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			started.Add(1)
			_, err := f.fetchFrom(ctx, 0, session.Fetch{ID: uint64(i + 1), Partition: Partition{Topic: "t", Partition: i}, Epoch: 1, Capability: "cap"}, time.Minute)
			errs <- err
		}()
	}
	waitFor(t, "the first fetches held", func() bool { return g.held.Load() >= limit && started.Load() == fetches })
	// Every fetch was asked for: give the ones past the limit time to
	// reach the gateway, were they not held back (a wait that passes
	// only when nothing goes wrong).
	for deadline := time.Now().Add(500 * time.Millisecond); time.Now().Before(deadline) && g.held.Load() <= limit; {
		time.Sleep(5 * time.Millisecond)
	}
	close(g.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("fetch: %v", err)
		}
	}
	if most := g.mostHeld.Load(); most != limit {
		t.Errorf("the gateway held %d fetches at once, want at most GatewayFetchesMax (%d)", most, limit)
	}
}

// TestFetchTimeoutStartsWithItsSlot: a fetch waiting for a slot of its
// gateway is not timed out for it — waiting is no gateway's silence,
// and a timed-out fetch would move every fetch to the next gateway.
func TestFetchTimeoutStartsWithItsSlot(t *testing.T) {
	g := newSlowGateway(t, "/partitions/0/")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := slotsFetcher(ctx, g, 1)
	held := make(chan error, 1)
	go func() {
		_, err := f.fetchFrom(ctx, 0, session.Fetch{ID: 1, Partition: Partition{Topic: "t", Partition: 0}, Epoch: 1, Capability: "cap"}, time.Minute)
		held <- err
	}()
	waitFor(t, "the first fetch held", func() bool { return g.held.Load() == 1 })
	// Long enough for the request itself once it has the slot, on a
	// loaded machine; the wait for the slot is made longer still.
	const timeout = 2 * time.Second
	queued := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := f.fetchFrom(ctx, 0, session.Fetch{ID: 2, Partition: Partition{Topic: "t", Partition: 1}, Epoch: 1, Capability: "cap"}, timeout)
		queued <- err
	}()
	// The second waits for the slot well past its own timeout (a lower
	// bound on time only: a slow machine waits longer, never shorter; no
	// event to wait on but the clock).
	waitFor(t, "2.5 of its timeouts to pass", func() bool { return time.Since(start) > 5*timeout/2 })
	select {
	case err := <-queued:
		t.Fatalf("the queued fetch ended while the slot was taken: %v", err)
	default:
	}
	close(g.release)
	if err := <-held; err != nil {
		t.Fatalf("held fetch: %v", err)
	}
	if err := <-queued; err != nil {
		t.Fatalf("the fetch that waited for its slot: %v", err)
	}
}
