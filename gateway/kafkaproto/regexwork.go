package kafkaproto

import (
	"slices"
	"sync"
	"time"

	"github.com/capgate/capgate/internal/topicpattern"
)

// regexWork is what the listener spends matching KIP-848 regexes over
// its topic list (matchRegex), bounded per tenant. A match is counted
// (topicpattern.Scanner, within topicpattern.DefaultMaxSteps) and runs on
// the heartbeat's own goroutine before anything reaches the coordinator,
// and a regex matching nothing the credential allows is answered
// UNKNOWN_TOPIC_OR_PARTITION — sent again and again: one credential
// spent up to DefaultMaxSteps (tens of ms of a core) per heartbeat of
// each of its connections, a regex of its own each time (redteam18).
//
//   - The last match of each regex text is kept with the topic list's
//     gen it ran against (regexCacheMax texts, regexCacheNamesMax names
//     matched in all; full, it is emptied), so a fleet of one service
//     joining with one regex matches it once per list, and a regex sent
//     again costs nothing until the list changes. The names are bounded
//     apart: a match keeps every topic it matched before the
//     connection's own filter, so a credential for a-* sending ever new
//     regexes that match every topic (.*|x1, .*|x2, … — each answered
//     UNKNOWN_TOPIC_OR_PARTITION, none of them its own) filled 1,024
//     entries of the whole topic list: ~160 KB each on 10,000 topics,
//     ~164 MB, and more on a larger fleet (listener14).
//   - A match that runs is paid after it ran, in its tenant's steps
//     (Principal.tenant), which come back at regexStepsPerSecond; while
//     a tenant owes steps its next match is not run: the heartbeat is
//     answered COORDINATOR_NOT_AVAILABLE (retriable) saying so. At most
//     regexTenantsMax tenants owe at once (those paid up are dropped
//     first; still full, a new one is answered so too).
type regexWork struct {
	mu    sync.Mutex
	cache map[string]regexMatch
	names int // in cache's matches: at most regexCacheNamesMax, or one match's
	owed  map[string]regexDebt
}

// regexMatch is a regex's last match: every topic it matched (before
// the connection's own filter), or over (past DefaultMaxSteps), against
// the topic list of gen.
type regexMatch struct {
	gen   uint64
	names []string
	over  bool
}

// regexDebt is a tenant's unpaid steps as of at.
type regexDebt struct {
	steps float64
	at    time.Time
}

const (
	regexCacheMax       = 1024
	regexCacheNamesMax  = 1 << 20 // 16 MiB of string headers; the strings are the topic list's
	regexTenantsMax     = 4096
	regexStepsPerSecond = topicpattern.DefaultMaxSteps
)

// cached is text's last match against gen, if that is what it ran against.
func (w *regexWork) cached(text string, gen uint64) (regexMatch, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	m, ok := w.cache[text]
	return m, ok && m.gen == gen
}

// mayRun reports whether tenant owes no steps at now.
func (w *regexWork) mayRun(tenant string, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	d, ok := w.owed[tenant]
	if ok {
		return d.left(now) <= 0
	}
	return len(w.owed) < regexTenantsMax || w.dropPaid(now)
}

// ran keeps a match of text and charges its steps to tenant.
func (w *regexWork) ran(tenant, text string, m regexMatch, steps int, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.keepLocked(text, m)
	if w.owed == nil {
		w.owed = make(map[string]regexDebt)
	}
	if _, ok := w.owed[tenant]; !ok && len(w.owed) >= regexTenantsMax && !w.dropPaid(now) {
		return // full of tenants in debt: mayRun refuses this one next time
	}
	w.owed[tenant] = regexDebt{steps: max(w.owed[tenant].left(now), 0) + float64(steps), at: now}
}

// keepLocked keeps m as text's last match, emptying the cache first when
// it holds regexCacheMax texts or m's names would take it past
// regexCacheNamesMax. w.mu held.
func (w *regexWork) keepLocked(text string, m regexMatch) {
	if old, ok := w.cache[text]; ok {
		w.names -= len(old.names)
		delete(w.cache, text)
	}
	if w.cache == nil || len(w.cache) >= regexCacheMax || w.names+len(m.names) > regexCacheNamesMax {
		w.cache, w.names = make(map[string]regexMatch), 0
	}
	m.names = slices.Clip(m.names)
	w.cache[text] = m
	w.names += len(m.names)
}

// left is what d still owes at now.
func (d regexDebt) left(now time.Time) float64 {
	return d.steps - now.Sub(d.at).Seconds()*regexStepsPerSecond
}

// dropPaid forgets tenants that owe nothing at now; it reports whether
// there is room for another.
func (w *regexWork) dropPaid(now time.Time) bool {
	for tenant, d := range w.owed {
		if d.left(now) <= 0 {
			delete(w.owed, tenant)
		}
	}
	return len(w.owed) < regexTenantsMax
}
