package client

import (
	"sync"
	"time"
)

// beatFailures rate-limits the log of failed heartbeats as unanswered
// does fetches (logThrottle): while the coordinator is down (restarting, failing over)
// the driver retries the heartbeat about every second, and one warning
// per attempt flooded the log. The first failure is logged, then at most
// one line per unansweredLogEvery with the count of failures not
// logged; the first heartbeat answered after failures is logged once
// (info), with how many failed and for how long. Safe for concurrent
// use.
type beatFailures struct {
	mu       sync.Mutex
	since    time.Time // the first failure since the last answer (zero: none)
	failures int       // since the last answer
	log      logThrottle
}

// failed records a failed heartbeat at now and says whether to log it,
// with how many failures went unlogged before it.
func (b *beatFailures) failed(now time.Time) (log bool, missed int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failures == 0 {
		b.since = now
	}
	b.failures++
	return b.log.due(now)
}

// answered records an answered heartbeat: recovered when heartbeats had
// failed since the last answer, with how many and since when.
func (b *beatFailures) answered() (recovered bool, failures int, since time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failures == 0 {
		return false, 0, time.Time{}
	}
	failures, since = b.failures, b.since
	b.since, b.failures, b.log = time.Time{}, 0, logThrottle{}
	return true, failures, since
}
