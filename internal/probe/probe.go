// Package probe caches whether Kafka is reachable for the /readyz of
// the coordinator and the gateway: the last outcome of a Kafka call, and
// at most one probe at a time when it is stale, so a flood of readiness
// checks costs Kafka one request.
package probe

import (
	"sync"
	"time"
)

// TTL is how long a Kafka reachability result is used before /readyz
// starts another probe.
const TTL = 5 * time.Second

// Kafka caches whether Kafka answered: the outcome of the last metadata
// read or probe. The zero value has no result yet. Safe for concurrent
// use.
type Kafka struct {
	mu      sync.Mutex
	at      time.Time // of the last result
	err     error
	probing bool
}

// Record keeps the outcome of a Kafka call made at at.
func (p *Kafka) Record(at time.Time, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !at.Before(p.at) {
		p.at, p.err = at, err
	}
}

// Status is "" when the last result was a success, else why not. The
// first call with no result probes at once (within the probe's own timeout) and
// waits for it; later, a result older than TTL starts probe in
// the background, once at a time, and the last result answers meanwhile.
func (p *Kafka) Status(now time.Time, probe func() error) string {
	p.mu.Lock()
	stale := now.Sub(p.at) >= TTL && !p.probing
	first := stale && p.at.IsZero()
	p.probing = p.probing || stale
	p.mu.Unlock()
	run := func() {
		start := time.Now()
		err := probe()
		p.mu.Lock()
		p.probing = false
		p.mu.Unlock()
		p.Record(start, err)
	}
	switch {
	case first:
		run()
	case stale:
		go run()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.at.IsZero():
		return "no answer from Kafka yet"
	case p.err != nil:
		return "unreachable (tried at " + p.at.UTC().Format(time.RFC3339) + "): " + p.err.Error()
	}
	return ""
}
