package ocap

import (
	"sync"
	"time"
)

// Cache remembers verified tokens by their exact string so repeats skip
// the signature check. It is bounded (MaxEntries), treats an entry as gone
// once its token expired (exp + leeway), can be flushed per signing key or
// wholesale, and is safe for concurrent use. It only ever holds tokens
// that verified: callers Put after a successful Verify, never on failure.
//
// A hit says only "this exact string verified once and has not expired";
// every request must still check topic, partition, op, offsets, fence and
// deny-list (gateway/authz).
type Cache struct {
	max    int
	leeway int64

	mu sync.RWMutex
	m  map[string]cacheEntry
}

type cacheEntry struct {
	claims *Claims
	until  int64 // unix seconds: exp + leeway
}

// NewCache makes a cache of at most maxEntries tokens.
func NewCache(maxEntries int, leeway time.Duration) *Cache {
	if maxEntries < 1 {
		maxEntries = 1
	}
	return &Cache{max: maxEntries, leeway: int64(leeway / time.Second), m: make(map[string]cacheEntry, min(maxEntries, 1<<16))}
}

// Get returns the claims of token if it is cached and not expired at now.
// It does not allocate.
func (c *Cache) Get(token []byte, now time.Time) (*Claims, bool) {
	c.mu.RLock()
	e, ok := c.m[string(token)]
	c.mu.RUnlock()
	if !ok || now.Unix() >= e.until {
		return nil, false
	}
	return e.claims, true
}

// Put caches a token that just verified as claims.
func (c *Cache) Put(token string, claims *Claims) {
	e := cacheEntry{claims: claims, until: int64(claims.ExpiresAt) + c.leeway}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[token]; !ok && len(c.m) >= c.max {
		c.evictLocked()
	}
	c.m[token] = e
}

// evictLocked drops expired entries first; if the cache is still full it
// drops an eighth of it (map order is random, so this is random eviction).
func (c *Cache) evictLocked() {
	now := time.Now().Unix()
	for k, e := range c.m {
		if now >= e.until {
			delete(c.m, k)
		}
	}
	drop := len(c.m) - c.max + 1 + c.max/8
	for k := range c.m {
		if drop <= 0 {
			break
		}
		delete(c.m, k)
		drop--
	}
}

// Sweep removes entries expired at now.
func (c *Cache) Sweep(now time.Time) {
	n := now.Unix()
	c.mu.Lock()
	for k, e := range c.m {
		if n >= e.until {
			delete(c.m, k)
		}
	}
	c.mu.Unlock()
}

// FlushKeys removes every entry signed by one of kids.
func (c *Cache) FlushKeys(kids ...string) {
	if len(kids) == 0 {
		return
	}
	c.mu.Lock()
	for k, e := range c.m {
		for _, kid := range kids {
			if e.claims.kid == kid {
				delete(c.m, k)
				break
			}
		}
	}
	c.mu.Unlock()
}

// Flush empties the cache.
func (c *Cache) Flush() {
	c.mu.Lock()
	clear(c.m)
	c.mu.Unlock()
}

// Len is the number of entries.
func (c *Cache) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m)
}
