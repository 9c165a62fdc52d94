package client

import (
	"context"
	"errors"
	"net/http"
	"strconv"
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
// An answer nobody asks for is dropped after
// request_timeout: it was admitted by a gateway under the same capability
// and epoch as the fetch before it, and is delivered only if the session
// still holds the partition at that epoch when it asks.

// aheadKey is what a fetch must match to take an answer fetched ahead.
type aheadKey struct {
	epoch      uint64
	capability string
	offset     int64
}

// ahead is one fetch started before the session asked for it. Its fields
// below done are written before done is closed; claimed, chained and next
// are guarded by the fetcher's mutex.
type ahead struct {
	key     aheadKey
	req     session.Fetch
	gateway int // the gateway that answered the fetch before it
	cancel  context.CancelFunc
	done    chan struct{}
	res     fetched
	err     error

	claimed bool  // the session asked for it
	chained bool  // the fetch after it was started
	next    int64 // its answer's next offset, from the headers; 0 until known
}

func keyOf(req session.Fetch) aheadKey {
	return aheadKey{epoch: req.Epoch, capability: req.Capability, offset: req.Offset}
}

// claim takes the answer fetched ahead for exactly req, if any: it waits
// for it within ctx and returns it (ok) when it is an answer or a gateway
// refusal. A fetch ahead of the partition that does not match is
// cancelled and dropped.
func (f *fetcher) claim(ctx context.Context, req session.Fetch) (res fetched, err error, ok bool) {
	f.mu.Lock()
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
	f.chainLocked(a)
	f.mu.Unlock()
	select {
	case <-a.done:
	case <-ctx.Done():
		a.cancel()
		return fetched{}, nil, false
	}
	a.cancel()
	var refusal *Error
	if a.err != nil && !errors.As(a.err, &refusal) {
		return fetched{}, nil, false
	}
	return a.res, a.err, true
}

// chainLocked starts the fetch after a claimed fetch ahead once its next
// offset is known and records flowed.
func (f *fetcher) chainLocked(a *ahead) {
	if a.claimed && !a.chained && a.next > a.key.offset {
		a.chained = true
		f.startAheadLocked(a.gateway, a.req, a.next)
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
// i, unless a fetch ahead of that partition exists.
func (f *fetcher) startAheadLocked(i int, prev session.Fetch, next int64) {
	if f.aheads[prev.Partition] != nil || f.base.Err() != nil {
		return
	}
	req := prev
	req.Offset = next
	ctx, cancel := context.WithCancel(f.base)
	a := &ahead{key: keyOf(req), req: req, gateway: i, cancel: cancel, done: make(chan struct{})}
	f.aheads[req.Partition] = a
	go f.runAhead(ctx, a)
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
	a.res, a.err = f.fetchOnce(ctx, a.gateway, a.req, hook)
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
