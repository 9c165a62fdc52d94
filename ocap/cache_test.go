package ocap

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

func mintCap(t testing.TB, f *fixture, pt int32, ttl time.Duration) (string, *Claims) {
	t.Helper()
	tok, c, err := f.minter.Mint(KindCapability, Claims{Subject: "m-1", Group: "g", Topic: "orders", Partition: part(pt), Epoch: 1, Ops: Ops(OpFetch)}, t0, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return tok, c
}

func TestCacheHitAndExpiry(t *testing.T) {
	f := newFixture(t)
	c := NewCache(10, 2*time.Second)
	tok, claims := mintCap(t, f, 0, time.Minute)
	if _, ok := c.Get([]byte(tok), t0); ok {
		t.Fatal("hit on empty cache")
	}
	c.Put(tok, claims)
	got, ok := c.Get([]byte(tok), t0.Add(61*time.Second))
	if !ok || got != claims {
		t.Fatal("miss inside leeway")
	}
	if _, ok := c.Get([]byte(tok), t0.Add(62*time.Second)); ok {
		t.Fatal("hit at exp + leeway")
	}
	c.Sweep(t0.Add(62 * time.Second))
	if c.Len() != 0 {
		t.Fatalf("sweep left %d", c.Len())
	}
}

func TestCacheBounded(t *testing.T) {
	f := newFixture(t)
	c := NewCache(64, 0)
	for i := 0; i < 1000; i++ {
		tok, claims := mintCap(t, f, int32(i), 5*time.Minute)
		c.Put(tok, claims)
		if c.Len() > 64 {
			t.Fatalf("len %d > 64 after %d puts", c.Len(), i+1)
		}
	}
}

func TestCacheFlushPerKey(t *testing.T) {
	f := newFixture(t)
	c := NewCache(100, 0)
	tokA, ca := mintCap(t, f, 0, 5*time.Minute)
	c.Put(tokA, ca)
	ring := *f.ring
	if err := ring.Rotate(newSeeded(7), t0); err != nil {
		t.Fatal(err)
	}
	f.minter.SetRing(&ring)
	tokB, cb := mintCap(t, f, 1, 5*time.Minute)
	c.Put(tokB, cb)
	if ca.KeyID() == cb.KeyID() {
		t.Fatal("rotation did not change the signing key")
	}
	c.FlushKeys(ca.KeyID())
	if _, ok := c.Get([]byte(tokA), t0); ok {
		t.Fatal("flushed key still cached")
	}
	if _, ok := c.Get([]byte(tokB), t0); !ok {
		t.Fatal("other key flushed too")
	}
	c.Flush()
	if c.Len() != 0 {
		t.Fatal("flush left entries")
	}
}

// TestCacheNeverHoldsFailures documents the contract the gateway follows:
// Put only after Verify succeeded. A forged token verified and refused
// never becomes a hit.
func TestCacheNeverHoldsFailures(t *testing.T) {
	f := newFixture(t)
	c := NewCache(10, 0)
	tok, _ := mintCap(t, f, 0, 5*time.Minute)
	forged := tok[:len(tok)-2] + "AA"
	if _, err := f.v.Verify(forged, KindCapability, t0); err == nil {
		t.Fatal("forged token verified")
	}
	if _, ok := c.Get([]byte(forged), t0); ok {
		t.Fatal("failure cached")
	}
}

func TestCacheConcurrent(t *testing.T) {
	f := newFixture(t)
	c := NewCache(50, 0)
	toks := make([]string, 100)
	claims := make([]*Claims, 100)
	for i := range toks {
		toks[i], claims[i] = mintCap(t, f, int32(i), 5*time.Minute)
	}
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				k := (i*7 + w) % len(toks)
				if got, ok := c.Get([]byte(toks[k]), t0); ok && got != claims[k] {
					panic(fmt.Sprintf("cache returned claims of another token for %d", k))
				}
				c.Put(toks[k], claims[k])
				if i%500 == 0 {
					c.FlushKeys(claims[k].KeyID())
				}
			}
		}(w)
	}
	wg.Wait()
	if c.Len() > 50 {
		t.Fatalf("len %d", c.Len())
	}
}

// TestCacheHitAllocatesNothing: a hit is on every fetch's path.
func TestCacheHitAllocatesNothing(t *testing.T) {
	f := newFixture(t)
	c := NewCache(100_000, 2*time.Second)
	tok, claims := mintCap(t, f, 0, time.Minute)
	c.Put(tok, claims)
	b := []byte(tok)
	if n := testing.AllocsPerRun(100, func() {
		if _, ok := c.Get(b, t0); !ok {
			t.Fatal("miss")
		}
	}); n != 0 {
		t.Fatalf("a hit allocates %v times", n)
	}
}

// TestCacheShardsKeepTheBound: with many shards the bound still holds and
// every stored token stays reachable until evicted.
func TestCacheShardsKeepTheBound(t *testing.T) {
	f := newFixture(t)
	c := NewCache(1024, 0)
	if len(c.shards) < 2 {
		t.Fatalf("%d shards for 1024 entries", len(c.shards))
	}
	toks := make([]string, 3000)
	for i := range toks {
		tok, claims := mintCap(t, f, int32(i), 5*time.Minute)
		toks[i] = tok
		c.Put(tok, claims)
		if c.Len() > 1024 {
			t.Fatalf("len %d > 1024 after %d puts", c.Len(), i+1)
		}
	}
	if _, ok := c.Get([]byte(toks[len(toks)-1]), t0); !ok {
		t.Fatal("the last token put is not cached")
	}
}
