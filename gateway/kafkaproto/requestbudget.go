package kafkaproto

// Behavior: the request bytes the listener holds, bounded across
// connections (kafka_max_request_bytes_held, _per_tenant), as the
// answers' are (gateway max_answer_bytes_held).
//
//   - A frame over frameChunk (64 KiB, the buffer every frame starts in)
//     reserves its whole announced size when its size prefix has arrived,
//     before a byte of it is read, and holds it until its request has
//     been answered. Smaller frames reserve nothing: a connection holds
//     one at a time, so they are bounded by kafka_max_connections × 64 KiB.
//     Before, every connection could hold kafka_max_request_bytes (8 MiB,
//     ~12 MiB of heap read by doubling), any principal's: 128
//     connections of one consume-only credential took the gateway from
//     30 MB to 1.6 GB (redteam7 #4).
//   - A frame the budget cannot hold now — in all, or its tenant's
//     (tenantKey) — waits, not reading, until bytes are given back or its
//     read deadline (read_timeout from the size prefix, auth_timeout
//     before SASL) passes; then the connection is closed, counted
//     (capgate_gateway_kafka_connections_refused_total{limit=
//     "request_bytes_held"|"request_bytes_held_per_tenant"}).
//     Waiting, not closing at once: the client's frame is most likely a
//     Produce, which closing would make it send again whole. It cannot
//     deadlock: a waiting connection holds no budget, and one holding
//     budget needs only its own client's bytes (read_timeout) and its
//     handler (bounded by its own timeouts) to give it back — the whole
//     frame is reserved at once, as Kafka's queued.max.request.bytes
//     pool allocates it, never a part that could wait for the rest.
//   - The memory is still taken as the bytes arrive (frameChunk, then
//     doubling: readBody): an announced size alone holds budget, never
//     memory. One tenant announcing frames it never sends holds at most
//     its share for read_timeout; others' frames go on within the rest.
//   - kafka_max_request_bytes_held_per_tenant is at least
//     kafka_max_request_bytes (validated), so any one frame fits.

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// errRequestBudget: a frame found no room in the request budget before
// its read deadline.
var errRequestBudget = errors.New("kafkaproto: no room in the request budget (kafka_max_request_bytes_held)")

// requestBudget counts the request bytes held (requestbudget.go's
// Behavior). A zero max or maxPerTenant bounds nothing.
type requestBudget struct {
	max, maxPerTenant int64

	mu       sync.Mutex
	total    int64
	byTenant map[string]int64
	// freed is closed, and replaced, whenever bytes are given back:
	// what waiters wait on.
	freed chan struct{}

	waits atomic.Uint64
}

func newRequestBudget(max, maxPerTenant int64) *requestBudget {
	return &requestBudget{max: max, maxPerTenant: maxPerTenant, byTenant: map[string]int64{}, freed: make(chan struct{})}
}

// take reserves n bytes for tenant, waiting while they do not fit until
// deadline or done. It returns true when reserved, else the bound they
// did not fit under.
func (b *requestBudget) take(tenant string, n int64, deadline time.Time, done <-chan struct{}) (limit, bool) {
	var timeout <-chan time.Time
	for {
		b.mu.Lock()
		over, fits := b.fitsLocked(tenant, n)
		if fits {
			b.total += n
			b.byTenant[tenant] += n
			b.mu.Unlock()
			return 0, true
		}
		freed := b.freed
		b.mu.Unlock()
		if timeout == nil {
			b.waits.Add(1)
			t := time.NewTimer(time.Until(deadline))
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-freed:
		case <-timeout:
			return over, false
		case <-done:
			return over, false
		}
	}
}

// fitsLocked reports whether n more bytes of tenant's fit, else the
// bound they are over.
func (b *requestBudget) fitsLocked(tenant string, n int64) (limit, bool) {
	switch {
	case b.maxPerTenant > 0 && b.byTenant[tenant]+n > b.maxPerTenant:
		return limitRequestBytesPerTenant, false
	case b.max > 0 && b.total+n > b.max:
		return limitRequestBytes, false
	}
	return 0, true
}

// give returns n bytes of tenant's that take reserved, and wakes the
// waiters.
func (b *requestBudget) give(tenant string, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.total -= n
	if b.byTenant[tenant] -= n; b.byTenant[tenant] <= 0 {
		delete(b.byTenant, tenant)
	}
	close(b.freed)
	b.freed = make(chan struct{})
}

// held is the number of bytes reserved now.
func (b *requestBudget) held() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total
}

// reserveFrame reserves a frame of n bytes (requestbudget.go's Behavior)
// before it is read, until deadline: an error closes the connection.
func (c *conn) reserveFrame(n int, deadline time.Time) error {
	if n <= frameChunk {
		return nil
	}
	over, ok := c.s.requests.take(c.requestTenant, int64(n), deadline, c.ctx.Done())
	if !ok {
		c.s.refusedConns[over].Add(1)
		c.s.refused.Refused("kafka request", "kafka_max_"+Limits[over]+" left no room for the frame within its read timeout: connection closed",
			append(c.logFields(false), zap.Int("frame_bytes", n))...)
		return errRequestBudget
	}
	c.requestHeld, c.heldTenant = int64(n), c.requestTenant
	return nil
}

// releaseFrame gives back what reserveFrame reserved: the request has
// been answered, or the connection ends. It goes back to the tenant it
// was taken from: a SaslAuthenticate frame of a re-authentication is
// reserved under the old tenant and released after claimIdentity moved
// the connection to the new one (review12 #1: the old tenant's share
// leaked for good, the new one's went below zero).
func (c *conn) releaseFrame() {
	if c.requestHeld > 0 {
		c.s.requests.give(c.heldTenant, c.requestHeld)
		c.requestHeld, c.heldTenant = 0, ""
	}
}

// RequestBytesHeld is the request bytes the listener holds now
// (kafka_max_request_bytes_held).
func (s *Server) RequestBytesHeld() int64 { return s.requests.held() }

// RequestBudgetWaits is how many frames had to wait for room in the
// request budget.
func (s *Server) RequestBudgetWaits() uint64 { return s.requests.waits.Load() }
