package client

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/capgate/capgate/client/driver"
	"github.com/capgate/capgate/client/session"
)

// fetchesAt counts the fetches the gateways answered (or saw cancelled)
// of p at offset with capability.
func (e *env) fetchesAt(capability string, p Partition, offset int64) int {
	n := 0
	for _, f := range e.store.seen() {
		if f.capability == capability && f.partition == p && f.offset == offset {
			n++
		}
	}
	return n
}

func (e *env) fetcher(ctx context.Context, cfg Config) *fetcher {
	tr := &transport{http: newHTTPClient(nil, 0), backoff: backoff{base: cfg.RetryBackoff, max: cfg.RetryBackoffMax}}
	return ownFetcher(ctx, cfg, tr)
}

// ownFetcher fetches from cfg.Gateways through tr, with a pool of its
// own (cfg.GatewayFetchesMax).
func ownFetcher(ctx context.Context, cfg Config, tr *transport) *fetcher {
	urls := trimURLs(cfg.Gateways)
	trs := make([]*transport, len(urls))
	for i := range trs {
		trs[i] = tr
	}
	return newFetcher(ctx, cfg, NewFetchPool(cfg.GatewayFetchesMax), trs, urls)
}

// TestFetchAheadHandsOverExactMatchesOnly: after a fetch that moved the
// offset, the next one of the partition is already under way; the session
// asking for exactly it gets it without another request. A fetch under
// another epoch and capability never gets it.
func TestFetchAheadHandsOverExactMatchesOnly(t *testing.T) {
	e := newEnv(t, nil)
	e.store.append(p0, 12)
	e.store.allow("cap-1", p0)
	e.store.allow("cap-2", p0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := e.fetcher(ctx, e.config())
	fetch := func(id uint64, epoch uint64, capability string, offset int64) (driver.Fetched, error) {
		return f.fetchFrom(ctx, 0, session.Fetch{ID: id, Partition: p0, Epoch: epoch, Offset: offset, Capability: capability}, 0)
	}

	if d, err := fetch(1, 1, "cap-1", 0); err != nil || d.Next != 4 {
		t.Fatalf("first fetch: %+v %v", d, err)
	}
	waitFor(t, "the fetch from 4 ahead", func() bool { return e.fetchesAt("cap-1", p0, 4) == 1 })
	if d, err := fetch(2, 1, "cap-1", 4); err != nil || d.Next != 8 || d.Records != 4 {
		t.Fatalf("second fetch: %+v %v", d, err)
	}
	if n := e.fetchesAt("cap-1", p0, 4); n != 1 {
		t.Fatalf("%d requests from offset 4, want the one made ahead", n)
	}

	// The fetch from 8 is ahead under epoch 1; epoch 2 must not take it.
	waitFor(t, "the fetch from 8 ahead", func() bool { return e.fetchesAt("cap-1", p0, 8) == 1 })
	if d, err := fetch(3, 2, "cap-2", 8); err != nil || d.Next != 12 {
		t.Fatalf("fetch under epoch 2: %+v %v", d, err)
	}
	if n := e.fetchesAt("cap-2", p0, 8); n != 1 {
		t.Fatalf("%d requests from 8 with the epoch-2 capability, want 1 of its own", n)
	}

}

// TestFetchAheadFailureIsFetchedAgain: a fetch ahead that failed on the
// way (not a gateway refusal) is not handed over; the session's fetch asks
// the gateway itself.
func TestFetchAheadFailureIsFetchedAgain(t *testing.T) {
	e := newEnv(t, nil)
	e.store.append(p0, 8)
	e.store.allow("cap-1", p0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := e.fetcher(ctx, e.config())
	if d, err := f.fetchFrom(ctx, 0, session.Fetch{ID: 1, Partition: p0, Epoch: 1, Offset: 0, Capability: "cap-1"}, 0); err != nil {
		t.Fatalf("first fetch: %+v %v", d, err)
	}
	waitFor(t, "the fetch ahead", func() bool { return e.fetchesAt("cap-1", p0, 4) == 1 })
	f.mu.Lock()
	a := f.aheads[p0]
	f.mu.Unlock()
	if a == nil {
		t.Fatal("no fetch ahead registered")
	}
	<-a.done
	a.err = errFetchAheadTest // as if it had failed
	before := e.fetchesAt("cap-1", p0, 4)
	if d, err := f.fetchFrom(ctx, 0, session.Fetch{ID: 2, Partition: p0, Epoch: 1, Offset: 4, Capability: "cap-1"}, 0); err != nil || d.Next != 8 {
		t.Fatalf("second fetch: %+v %v", d, err)
	}
	if after := e.fetchesAt("cap-1", p0, 4); after != before+1 {
		t.Fatalf("requests from 4: %d then %d, want one more", before, after)
	}
}

var errFetchAheadTest = http.ErrHandlerTimeout

// TestFetchAheadUnclaimedIsDropped: an answer fetched ahead that nobody
// asks for is dropped after request_timeout.
func TestFetchAheadUnclaimedIsDropped(t *testing.T) {
	e := newEnv(t, nil)
	e.store.append(p0, 8)
	e.store.allow("cap-1", p0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := e.config()
	cfg.RequestTimeout = 200 * time.Millisecond
	f := e.fetcher(ctx, cfg)
	if d, err := f.fetchFrom(ctx, 0, session.Fetch{ID: 1, Partition: p0, Epoch: 1, Offset: 0, Capability: "cap-1"}, 0); err != nil {
		t.Fatalf("first fetch: %+v %v", d, err)
	}
	waitFor(t, "the fetch ahead dropped", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.aheads) == 0 && e.fetchesAt("cap-1", p0, 4) == 1
	})
}

// TestFetchAheadOff: with FetchAhead false nothing is fetched that the
// session did not ask for.
func TestFetchAheadOff(t *testing.T) {
	e := newEnv(t, nil)
	e.store.append(p0, 8)
	e.store.allow("cap-1", p0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := e.config()
	cfg.FetchAhead = false
	f := e.fetcher(ctx, cfg)
	if d, err := f.fetchFrom(ctx, 0, session.Fetch{ID: 1, Partition: p0, Epoch: 1, Offset: 0, Capability: "cap-1"}, 0); err != nil {
		t.Fatalf("first fetch: %+v %v", d, err)
	}
	f.mu.Lock()
	n := len(f.aheads)
	f.mu.Unlock()
	if n != 0 || e.fetchesAt("cap-1", p0, 4) != 0 {
		t.Fatalf("fetched ahead with FetchAhead off: %d registered", n)
	}
}

// TestFetchAheadStopped: stopping a partition (an aborted fetch: a
// revoke) cancels what is fetched ahead of it and starts nothing more
// until the session asks for a fetch of it again.
func TestFetchAheadStopped(t *testing.T) {
	e := newEnv(t, nil)
	e.store.append(p0, 12)
	e.store.allow("cap-1", p0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := e.fetcher(ctx, e.config())
	if _, err := f.fetchFrom(ctx, 0, session.Fetch{ID: 1, Partition: p0, Epoch: 1, Offset: 0, Capability: "cap-1"}, 0); err != nil {
		t.Fatal(err)
	}
	f.stop(p0)
	f.mu.Lock()
	left := len(f.aheads) + len(f.claimed)
	f.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d fetches ahead left after stop", left)
	}
	f.mu.Lock()
	f.startAheadLocked(0, session.Fetch{ID: 1, Partition: p0, Epoch: 1, Offset: 0, Capability: "cap-1"}, 4)
	started := len(f.aheads)
	f.mu.Unlock()
	if started != 0 {
		t.Fatal("a stopped partition was fetched ahead")
	}
	if _, err := f.fetchFrom(ctx, 0, session.Fetch{ID: 2, Partition: p0, Epoch: 1, Offset: 4, Capability: "cap-1"}, 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "fetching ahead again once the session asked", func() bool { return e.fetchesAt("cap-1", p0, 8) == 1 })
}

// TestFetchAheadFollowsTheSessionsSize: a chain of fetches ahead asks for
// the size of the session's latest fetch of the partition, not the size
// it started with (the session shrinks its fetches as partitions are
// added: the buffer bound rests on it).
func TestFetchAheadFollowsTheSessionsSize(t *testing.T) {
	e := newEnv(t, nil)
	e.store.append(p0, 12)
	e.store.allow("cap-1", p0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := e.fetcher(ctx, e.config())
	fetch := func(id uint64, offset int64, size int32) {
		t.Helper()
		if _, err := f.fetchFrom(ctx, 0, session.Fetch{ID: id, Partition: p0, Epoch: 1, Offset: offset, Capability: "cap-1", MaxBytes: size}, 0); err != nil {
			t.Fatal(err)
		}
	}
	sizeAt := func(offset int64) string {
		for _, s := range e.store.seen() {
			if s.partition == p0 && s.offset == offset {
				return s.maxBytes
			}
		}
		return ""
	}
	fetch(1, 0, 4<<20)
	waitFor(t, "the fetch from 4 ahead", func() bool { return e.fetchesAt("cap-1", p0, 4) == 1 })
	fetch(2, 4, 1<<20) // claims the one ahead; the next starts at the new size
	waitFor(t, "the fetch from 8 ahead", func() bool { return e.fetchesAt("cap-1", p0, 8) == 1 })
	if got := sizeAt(4); got != "4194304" {
		t.Fatalf("the fetch from 4, started ahead of the session's first, asked %s, want 4194304", got)
	}
	if got := sizeAt(8); got != "1048576" {
		t.Fatalf("the fetch from 8 ahead asked max_bytes %s, want the session's latest 1048576", got)
	}
}
