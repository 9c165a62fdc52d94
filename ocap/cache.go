package ocap

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
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
//
// Reads take no lock and write nothing shared: the cache is split into
// shards, each an immutable map behind an atomic pointer that a writer
// replaces with an edited copy (copy-on-write). So gateways answering
// from many cores never contend on a hit (an RWMutex's reader count is a
// cache line every reader writes), and a Put — which follows a full
// Ed25519 verification — copies one shard of at most maxEntries/shards
// entries.
type Cache struct {
	perShard int
	leeway   int64
	seed     maphash.Seed
	shards   []cacheShard
}

type cacheShard struct {
	m  atomic.Pointer[map[string]cacheEntry] // never written in place
	mu sync.Mutex                            // serialises writers of this shard
	_  [48]byte                              // keep shards on their own cache lines
}

type cacheEntry struct {
	claims *Claims
	until  int64 // unix seconds: exp + leeway
}

// cacheShardsMax bounds the shards; a small cache has fewer, so that each
// holds at least 64 entries and the bound stays exact.
const cacheShardsMax = 256

// NewCache makes a cache of at most maxEntries tokens.
func NewCache(maxEntries int, leeway time.Duration) *Cache {
	maxEntries = max(maxEntries, 1)
	shards := 1
	for shards*2 <= cacheShardsMax && shards*2*64 <= maxEntries {
		shards *= 2
	}
	c := &Cache{perShard: maxEntries / shards, leeway: int64(leeway / time.Second), seed: maphash.MakeSeed(), shards: make([]cacheShard, shards)}
	for i := range c.shards {
		empty := map[string]cacheEntry{}
		c.shards[i].m.Store(&empty)
	}
	return c
}

// shard picks a token's shard from its tail: the signature, uniform over
// verified tokens (the only ones ever stored).
func (c *Cache) shard(token []byte) *cacheShard {
	if len(c.shards) == 1 {
		return &c.shards[0]
	}
	tail := token[max(len(token)-16, 0):]
	return &c.shards[maphash.Bytes(c.seed, tail)&uint64(len(c.shards)-1)]
}

// Get returns the claims of token if it is cached and not expired at now.
// It does not allocate and takes no lock.
func (c *Cache) Get(token []byte, now time.Time) (*Claims, bool) {
	e, ok := (*c.shard(token).m.Load())[string(token)]
	if !ok || now.Unix() >= e.until {
		return nil, false
	}
	return e.claims, true
}

// Put caches a token that just verified as claims. A full shard first
// drops its expired entries, then a random eighth of itself.
func (c *Cache) Put(token string, claims *Claims) {
	e := cacheEntry{claims: claims, until: int64(claims.ExpiresAt) + c.leeway}
	s := c.shard([]byte(token))
	s.mu.Lock()
	defer s.mu.Unlock()
	old := *s.m.Load()
	_, replacing := old[token]
	next := make(map[string]cacheEntry, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	if !replacing && len(next) >= c.perShard {
		c.evict(next, time.Now().Unix())
	}
	next[token] = e
	s.m.Store(&next)
}

// evict drops expired entries; if the shard is still full it drops an
// eighth of it (map order is random, so this is random eviction).
func (c *Cache) evict(m map[string]cacheEntry, now int64) {
	for k, e := range m {
		if now >= e.until {
			delete(m, k)
		}
	}
	drop := len(m) - c.perShard + 1 + c.perShard/8
	for k := range m {
		if drop <= 0 {
			break
		}
		delete(m, k)
		drop--
	}
}

// edit replaces every shard with a copy keeping the entries keep accepts.
func (c *Cache) edit(keep func(cacheEntry) bool) {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		old := *s.m.Load()
		next := make(map[string]cacheEntry, len(old))
		for k, e := range old {
			if keep(e) {
				next[k] = e
			}
		}
		s.m.Store(&next)
		s.mu.Unlock()
	}
}

// Sweep removes entries expired at now.
func (c *Cache) Sweep(now time.Time) {
	n := now.Unix()
	c.edit(func(e cacheEntry) bool { return n < e.until })
}

// FlushKeys removes every entry signed by one of kids.
func (c *Cache) FlushKeys(kids ...string) {
	if len(kids) == 0 {
		return
	}
	c.edit(func(e cacheEntry) bool {
		for _, kid := range kids {
			if e.claims.kid == kid {
				return false
			}
		}
		return true
	})
}

// Flush empties the cache.
func (c *Cache) Flush() { c.edit(func(cacheEntry) bool { return false }) }

// Len is the number of entries.
func (c *Cache) Len() int {
	n := 0
	for i := range c.shards {
		n += len(*c.shards[i].m.Load())
	}
	return n
}
