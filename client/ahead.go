package client

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"sync"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client/session"
)

// Fetching ahead: while records flow, the fetcher starts a partition's
// next fetch as soon as the answer before it names its next offset (the
// Capgate-Next-Offset header, before the body is read and decoded), so a
// partition has two fetches in flight and the gateway and the network
// work while this process decodes — the pipelining kgo gets from fetching
// while its consumer polls. The session never learns of it: when it asks
// for exactly that fetch (partition, epoch, capability, offset), the
// fetcher hands over the answer fetched ahead; anything else cancels it.
// Answers and gateway refusals are handed over (the same request would
// get the same refusal); a transport failure is fetched again for real.
//
// It never outlives the session's interest: an aborted fetch of the
// partition (a revoke, or the driver giving up on it) stops it (stop),
// and nothing is fetched ahead for the partition until the session asks
// for a fetch of it again; an answer nobody asks for is dropped after
// request_timeout. An answer fetched ahead was admitted by a gateway under
// the same capability and epoch as the fetch before it, and is delivered
// only if the session still holds the partition at that epoch.

// aheadKey is what a fetch must match to take an answer fetched ahead.
type aheadKey struct {
	epoch      uint64
	capability string
	offset     int64
}

// ahead is one fetch started before the session asked for it. res and err
// are written before done is closed; claimed, chained and next are
// guarded by the fetcher's mutex.
type ahead struct {
	key     aheadKey
	req     session.Fetch
	gateway int // the gateway that answered the fetch before it
	cancel  context.CancelFunc
	done    chan struct{}
	res     fetched
	err     error
	// begun is closed once its request reached the HTTP transport (or
	// it gave up before): stop waits for it, so no fetch of a stopped
	// partition begins after stop returned.
	begun     chan struct{}
	beginOnce sync.Once

	claimed bool // the session asked for it
	chained bool // the fetch after it was started
	// chainBytes is the size the fetch after it asks for: the size of
	// the session's latest fetch of the partition (it claimed this one),
	// so a chain follows the session's sizing instead of keeping the
	// size it started with. f.mu.
	chainBytes int32
	next       int64 // its answer's next offset, from the headers; 0 until known
}

func keyOf(req session.Fetch) aheadKey {
	return aheadKey{epoch: req.Epoch, capability: req.Capability, offset: req.Offset}
}

func (a *ahead) markBegun() { a.beginOnce.Do(func() { close(a.begun) }) }

// claim takes the answer fetched ahead for exactly req, if any: it waits
// for it within ctx and returns it (ok) when it is an answer or a gateway
// refusal. A fetch ahead of the partition that does not match is
// cancelled and dropped. A fetch the session asks for lifts a stop of
// its partition.
func (f *fetcher) claim(ctx context.Context, req session.Fetch) (res fetched, err error, ok bool) {
	f.mu.Lock()
	delete(f.stopped, req.Partition)
	a := f.aheads[req.Partition]
	if a == nil {
		f.mu.Unlock()
		return fetched{}, nil, false
	}
	delete(f.aheads, req.Partition)
	if a.key != keyOf(req) {
		f.mu.Unlock()
		a.cancel()
		return fetched{}, nil, false
	}
	a.claimed = true
	a.chainBytes = req.MaxBytes
	f.claimed[req.Partition] = a
	f.chainLocked(a)
	f.mu.Unlock()
	defer f.unclaim(a)
	select {
	case <-a.done:
	case <-ctx.Done():
		return fetched{}, nil, false
	}
	var refusal *Error
	if a.err != nil && !errors.As(a.err, &refusal) {
		return fetched{}, nil, false
	}
	return a.res, a.err, true
}

func (f *fetcher) unclaim(a *ahead) {
	a.cancel()
	f.mu.Lock()
	if f.claimed[a.req.Partition] == a {
		delete(f.claimed, a.req.Partition)
	}
	f.mu.Unlock()
}

// stop cancels the fetches ahead of p and keeps any from starting until
// the session asks for a fetch of p again; it returns once none of them
// can still begin a request.
//
// Several partitions are stopped together: every fetch ahead of them is
// cancelled before any is waited for. One at a time, a Close of 2,000
// partitions waited for 2,000 goroutines in turn (a fetch ahead waiting
// for a slot of its gateway begins nothing, but says so only when it
// ran), under the consumer's lock: 0.4 s at load 25.
func (f *fetcher) stop(ps ...session.Partition) {
	if len(ps) == 0 {
		return
	}
	var victims []*ahead
	f.mu.Lock()
	for _, p := range ps {
		f.stopped[p] = true
		for _, a := range [...]*ahead{f.aheads[p], f.claimed[p]} {
			if a != nil {
				victims = append(victims, a)
			}
		}
		delete(f.aheads, p)
	}
	f.mu.Unlock()
	for _, a := range victims {
		a.cancel()
	}
	for _, a := range victims {
		<-a.begun
	}
}

// chainLocked starts the fetch after a claimed fetch ahead once its next
// offset is known and records flowed.
func (f *fetcher) chainLocked(a *ahead) {
	if a.claimed && !a.chained && a.next > a.key.offset {
		a.chained = true
		next := a.req
		next.MaxBytes = a.chainBytes
		f.startAheadLocked(a.gateway, next, a.next)
	}
}

// onNext is the header hook of a fetch the session asked for from
// gateway i: records flowed up to next, so fetch from there ahead.
func (f *fetcher) onNext(i int, req session.Fetch) func(http.Header) {
	if !f.cfg.FetchAhead {
		return nil
	}
	return func(h http.Header) {
		next, err := strconv.ParseInt(h.Get(api.HeaderNextOffset), 10, 64)
		if err != nil || next <= req.Offset {
			return
		}
		f.mu.Lock()
		f.startAheadLocked(i, req, next)
		f.mu.Unlock()
	}
}

// startAheadLocked starts fetching prev's partition from next on gateway
// i, unless the partition is stopped or has a fetch ahead already.
func (f *fetcher) startAheadLocked(i int, prev session.Fetch, next int64) {
	p := prev.Partition
	if f.stopped[p] || f.aheads[p] != nil || f.base.Err() != nil {
		return
	}
	req := prev
	req.Offset = next
	ctx, cancel := context.WithCancel(f.base)
	a := &ahead{key: keyOf(req), req: req, gateway: i, cancel: cancel, done: make(chan struct{}), begun: make(chan struct{})}
	f.aheads[p] = a
	f.running.Add(1)
	go func() {
		defer f.running.Done()
		f.runAhead(ctx, a)
	}()
}

// wait waits for the fetches ahead to end, once the consumer's context
// ended (no new one starts then): Close closes the idle connections only
// after they returned theirs.
func (f *fetcher) wait() {
	f.mu.Lock() // a start that saw the context alive has added itself
	f.mu.Unlock()
	f.running.Wait()
}

func (f *fetcher) runAhead(ctx context.Context, a *ahead) {
	hook := func(h http.Header) {
		next, err := strconv.ParseInt(h.Get(api.HeaderNextOffset), 10, 64)
		if err != nil {
			return
		}
		f.mu.Lock()
		a.next = next
		f.chainLocked(a)
		f.mu.Unlock()
	}
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GetConn: func(string) { a.markBegun() }})
	a.res, a.err = f.fetchOnce(ctx, a.gateway, a.req, hook, 0)
	a.markBegun()
	close(a.done)
	// Nobody asked for it within request_timeout: the session moved on
	// (revoked, renewed, rewound) or stopped.
	time.AfterFunc(f.cfg.RequestTimeout, func() {
		f.mu.Lock()
		if f.aheads[a.req.Partition] == a {
			delete(f.aheads, a.req.Partition)
		}
		f.mu.Unlock()
		a.cancel()
	})
}
