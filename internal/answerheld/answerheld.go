// Package answerheld bounds the answer bytes a fasthttp server of capgate
// (the gateway, the coordinator) holds while its clients read them.
//
// Behavior: an answer stays in the server's memory until the client has
// read all but what the sockets buffer, up to write_timeout, and the
// caps on work in progress end when the handler returns, before the
// write. Without a bound, a client opening many connections, each asking
// for a large answer and reading none of it, made the server hold
// connections × the answer's size (a gateway: max_fetch_bytes each; the
// coordinator: a tenant's group describes, committed offsets, listings,
// each up to megabytes). A server counts an answer of at least Min bytes
// from when its handler made it until fasthttp has written it, or reset
// the connection, and closed its Body: at most max bytes in all and
// perHolder for one holder. Over either, Take refuses and counts
// nothing; as Kafka serves a first batch whole, an answer is let through
// when its holder holds nothing, or the server nothing, even if it alone
// is larger than the cap (Force counts one that must be sent anyway).
// One connection holds one answer at a time (fasthttp writes an answer
// before it reads the connection's next request).
package answerheld

import (
	"bytes"
	"sync"

	"github.com/capgate/capgate/internal/bodyheld"
)

// Min is the smallest answer counted: smaller ones are copied into
// fasthttp's own buffers, and the sockets' buffers take them whole.
const Min = 16 << 10

// Refusal is why an answer was not counted: the request bodies' kinds.
type Refusal = bodyheld.Refusal

const (
	None       = bodyheld.None
	OverAll    = bodyheld.OverAll    // the server holds max
	OverHolder = bodyheld.OverHolder // the holder holds perHolder
)

// Counter is the answer bytes held now, in all and per holder.
type Counter struct {
	max, perHolder int64

	mu       sync.Mutex
	total    int64
	byHolder map[string]int64 // only holders holding bytes
}

// New bounds answers to max bytes in all and perHolder per holder.
func New(max, perHolder int64) *Counter {
	return &Counter{max: max, perHolder: perHolder, byHolder: map[string]int64{}}
}

// Take counts n bytes for holder, or refuses them, counting nothing.
func (c *Counter) Take(holder string, n int64) Refusal {
	c.mu.Lock()
	defer c.mu.Unlock()
	mine := c.byHolder[holder]
	if r := bodyheld.Room(c.total, mine, n, c.max, c.perHolder); r != None {
		return r
	}
	c.total += n
	c.byHolder[holder] = mine + n
	return None
}

// Full is why a Take of any size for holder would be refused now: the
// holder holds perHolder, or the server max (None while there is room).
// A server asks it before the work of an answer it could not refuse
// once made.
func (c *Counter) Full(holder string) Refusal {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.byHolder[holder] >= c.perHolder:
		return OverHolder
	case c.total >= c.max:
		return OverAll
	}
	return None
}

// Force counts n bytes for holder whatever they come to: an answer that
// must be sent (the request changed state). Later Takes see them.
func (c *Counter) Force(holder string, n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total += n
	c.byHolder[holder] += n
}

// Give returns n bytes of holder's that Take or Force counted.
func (c *Counter) Give(holder string, n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total -= n
	if c.byHolder[holder] -= n; c.byHolder[holder] <= 0 {
		delete(c.byHolder, holder)
	}
}

// Held is the number of bytes counted now.
func (c *Counter) Held() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// Holders is the number of holders holding bytes now.
func (c *Counter) Holders() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byHolder)
}

// Body is an answer as a fasthttp response body stream (SetBodyStream),
// its bytes counted until fasthttp has written it, or reset the
// response unwritten, and closed it.
type Body struct {
	bytes.Reader
	counter *Counter
	holder  string
	n       int64
}

var bodies = sync.Pool{New: func() any { return new(Body) }}

// NewBody is b as a stream whose Close gives its len(b) bytes, counted
// for holder, back to c.
func NewBody(c *Counter, holder string, b []byte) *Body {
	body := bodies.Get().(*Body)
	body.Reset(b)
	body.counter, body.holder, body.n = c, holder, int64(len(b))
	return body
}

// SupportsBodyWriteTo tells fasthttp to use WriteTo (fasthttp.BodyWriterTo).
func (b *Body) SupportsBodyWriteTo() bool { return true }

// Close gives the body's bytes back, once.
func (b *Body) Close() error {
	if b.counter != nil {
		b.counter.Give(b.holder, b.n)
	}
	b.counter, b.holder, b.n = nil, "", 0
	b.Reset(nil)
	bodies.Put(b)
	return nil
}
