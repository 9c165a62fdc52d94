// Package bodyheld bounds the large request bodies a fasthttp server of
// capgate (the gateway, the coordinator) reads at once.
//
// Behavior: fasthttp reads a body whole before the handler runs, and
// allocates a Content-Length body at its announced size as soon as the
// headers are in. The servers let only a bearer they know send more than
// a few KiB, but each connection of such a bearer could then hold
// max_body_bytes for read_timeout by sending the headers alone (a
// gateway: one producing credential, 2,000 connections from one address,
// 8 GiB; 200 of them 639 MiB in three seconds — redteam10 #4). A server
// counts such a body from its headers (HeaderReceived: Take) until its
// handler returned (Release) or its read failed (the ErrorHandler:
// Release; one no handler took within the stale time is swept when
// room is needed): at most max bytes in all and perHolder for one
// holder. Over either, the server gives the request its small cap, and
// the ErrorHandler (or the ExpectHandler, before the body is sent)
// answers the Refusal recorded for it instead of 413. As for a server's
// answer bytes, a body is let through when its holder, or the server,
// holds none: a cap never refuses every body.
//
// A request is keyed by its *fasthttp.RequestHeader: fasthttp hands
// HeaderReceived, the ExpectHandler, the handler and the ErrorHandler
// the same one (the connection's RequestCtx holds it), so it names a body
// from its headers to its end. A server without a hold pays one atomic
// load per request.
package bodyheld

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// Refusal is why a body was not counted.
type Refusal uint8

const (
	None       Refusal = iota
	OverAll            // the server holds max
	OverHolder         // the holder holds perHolder
)

// Holds is the large bodies counted now.
type Holds struct {
	max, perHolder int64
	stale          time.Duration // a hold no handler took within it: its read failed unseen

	mu       sync.Mutex
	total    int64
	byHolder map[string]int64
	holds    map[*fasthttp.RequestHeader]*hold
	pending  atomic.Int64 // len(holds)
}

type hold struct {
	holder  string
	n       int64
	refused Refusal
	since   time.Time
	handled bool // its handler runs: released when it returns, never swept
}

// New bounds bodies to max bytes in all and perHolder per holder; a
// hold no handler took within stale (read_timeout and a little) is
// taken for a read that failed unseen.
func New(max, perHolder int64, stale time.Duration) *Holds {
	return &Holds{max: max, perHolder: perHolder, stale: stale, byHolder: map[string]int64{}, holds: map[*fasthttp.RequestHeader]*hold{}}
}

// Take counts n body bytes of holder for the request of h, or records
// the refusal its body gets; it reports whether they were counted.
func (b *Holds) Take(h *fasthttp.RequestHeader, holder string, n int64, now time.Time) bool {
	b.Release(h) // one a request of this connection left, its end unseen
	b.mu.Lock()
	defer b.mu.Unlock()
	why := b.room(holder, n)
	if why != None && b.sweepLocked(now) {
		why = b.room(holder, n)
	}
	x := &hold{holder: holder, since: now, refused: why}
	if why == None {
		x.n = n
		b.total += n
		b.byHolder[holder] += n
	}
	b.holds[h] = x
	b.pending.Store(int64(len(b.holds)))
	return why == None
}

// Cap is the body cap of the request of h, whose body a server would
// let holder send up to limit: limit, its body (its Content-Length, or
// limit for a chunked one) counted for holder when over small; small
// when that body does not fit the bodies held (the refusal recorded for
// the ErrorHandler or ExpectHandler to answer). The servers' shared
// HeaderReceived step.
func (b *Holds) Cap(h *fasthttp.RequestHeader, holder string, limit, small int, now time.Time) int {
	n := int64(h.ContentLength())
	if n < 0 {
		n = int64(limit) // chunked: up to the cap, as it arrives
	}
	if n > int64(small) && n <= int64(limit) && !b.Take(h, holder, n, now) {
		return small
	}
	return limit
}

// room says whether n more bytes of holder fit (b.mu held).
func (b *Holds) room(holder string, n int64) Refusal {
	return Room(b.total, b.byHolder[holder], n, b.max, b.perHolder)
}

// Room is the rule of every held-bytes count (request bodies here,
// answers in internal/answerheld): n more bytes of a holder holding mine,
// of a server holding total, fit under perHolder and max — except that a
// holder holding nothing, or a server holding nothing, may take one item
// larger than the cap, as Kafka serves a first batch whole.
func Room(total, mine, n, max, perHolder int64) Refusal {
	switch {
	case mine > 0 && mine+n > perHolder:
		return OverHolder
	case total > 0 && total+n > max:
		return OverAll
	}
	return None
}

// sweepLocked releases the holds no handler took within stale; it
// reports whether it released any (b.mu held).
func (b *Holds) sweepLocked(now time.Time) bool {
	swept := false
	for h, x := range b.holds {
		if !x.handled && now.Sub(x.since) > b.stale {
			b.dropLocked(h, x)
			swept = true
		}
	}
	return swept
}

func (b *Holds) dropLocked(h *fasthttp.RequestHeader, x *hold) {
	delete(b.holds, h)
	if x.n > 0 {
		b.total -= x.n
		if b.byHolder[x.holder] -= x.n; b.byHolder[x.holder] <= 0 {
			delete(b.byHolder, x.holder)
		}
	}
	b.pending.Store(int64(len(b.holds)))
}

// Handling marks the request of h as taken by its handler.
func (b *Holds) Handling(h *fasthttp.RequestHeader) {
	if b.pending.Load() == 0 {
		return
	}
	b.mu.Lock()
	if x := b.holds[h]; x != nil {
		x.handled = true
	}
	b.mu.Unlock()
}

// Release ends the hold of the request of h, if any, and returns the
// refusal its body was to get (None when its bytes were counted, or it
// had no hold).
func (b *Holds) Release(h *fasthttp.RequestHeader) Refusal {
	if b.pending.Load() == 0 {
		return None
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	x := b.holds[h]
	if x == nil {
		return None
	}
	b.dropLocked(h, x)
	return x.refused
}

// Refused is the refusal recorded for the request of h, if any.
func (b *Holds) Refused(h *fasthttp.RequestHeader) Refusal {
	if b.pending.Load() == 0 {
		return None
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if x := b.holds[h]; x != nil {
		return x.refused
	}
	return None
}

// Held is the body bytes counted now.
func (b *Holds) Held() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total
}

// Pending is the requests with a hold (counted or refused) now.
func (b *Holds) Pending() int { return int(b.pending.Load()) }
