package authz

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/ocap"
)

// benchView holds n fences (other partitions of the capability's topic and
// group, so lookups hash the same kind of keys) and n denied ids.
func benchView(n int) *View {
	v := newView()
	u := api.SyncResponse{Seq: 1}
	for i := range n {
		u.Fences = append(u.Fences, api.Fence{Group: "billing", Topic: fmt.Sprintf("orders-%d", i/100), Partition: int32(i % 100), Epoch: 1})
		u.Denied = append(u.Denied, api.Denied{JTI: jti(1000 + i), Exp: t0.Unix() + 3600})
	}
	u.Fences = append(u.Fences, api.Fence{Group: "billing", Topic: "orders", Partition: 3, Epoch: 5})
	if _, err := v.Apply(u, t0); err != nil {
		panic(err)
	}
	return v
}

func BenchmarkDecide(b *testing.B) {
	v := benchView(10_000)
	c := capability()
	c.Chain = []string{jti(900_001)}
	req := fetchReq(42)
	b.ReportAllocs()
	for b.Loop() {
		if Decide(c, req, v, t0) != Allow {
			b.Fatal("refused")
		}
	}
}

func BenchmarkDecideParallel(b *testing.B) {
	v := benchView(10_000)
	c := capability()
	req := fetchReq(42)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if Decide(c, req, v, t0) != Allow {
				panic("refused")
			}
		}
	})
}

// hotFixture is a real minted, verified and cached capability.
type hotFixture struct {
	token  []byte
	claims *ocap.Claims
	cache  *ocap.Cache
}

func newHotFixture(b *testing.B) hotFixture {
	ring, err := ocap.NewKeyRing(newSeeded(1), t0)
	if err != nil {
		b.Fatal(err)
	}
	cfg := ocap.VerifierConfig{Issuer: "coord-1", Audience: "prod", Leeway: leeway, MaxLease: time.Hour}
	minter, err := ocap.NewMinter(cfg, ring, newSeeded(2))
	if err != nil {
		b.Fatal(err)
	}
	verifier, _ := ocap.NewVerifier(cfg)
	keys, _ := ocap.ImportJWKS(ring.JWKS())
	verifier.SetKeys(keys)
	c := capability()
	c.ID = ""
	tok, _, err := minter.Mint(ocap.KindCapability, *c, t0, time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	claims, err := verifier.Verify(tok, ocap.KindCapability, t0)
	if err != nil {
		b.Fatal(err)
	}
	cache := ocap.NewCache(100_000, leeway)
	cache.Put(tok, claims)
	return hotFixture{token: []byte(tok), claims: claims, cache: cache}
}

// plainView is the baseline: the same data in unsynchronised maps.
type plainView struct {
	fences map[FenceKey]uint64
	denied map[string]int64
	claims map[string]*ocap.Claims
}

func newPlainView(v *View, f hotFixture) plainView {
	p := plainView{fences: map[FenceKey]uint64{}, denied: map[string]int64{}, claims: map[string]*ocap.Claims{string(f.token): f.claims}}
	snap := v.Snapshot()
	for _, fence := range snap.Fences {
		p.fences[FenceKey{Group: fence.Group, Topic: fence.Topic, Partition: fence.Partition}] = fence.Epoch
	}
	for _, d := range snap.Denied {
		p.denied[d.JTI] = d.Exp
	}
	return p
}

func (p plainView) authorize(token []byte, req Request, now time.Time) bool {
	c, ok := p.claims[string(token)]
	if !ok || now.Unix() >= int64(c.ExpiresAt)+2 {
		return false
	}
	if c.Epoch != 0 && c.Epoch < p.fences[FenceKey{Group: c.Group, Topic: c.Topic, Partition: *c.Partition}] {
		return false
	}
	if _, ok := p.denied[c.ID]; ok {
		return false
	}
	for _, a := range c.Chain {
		if _, ok := p.denied[a]; ok {
			return false
		}
	}
	return c.Topic == req.Topic && *c.Partition == req.Partition && c.Ops.Has(req.Op) && c.AllowsOffset(req.Offset)
}

// BenchmarkCachedVerifyAndDecide is the gateway's per-request hot path (a
// verified-token cache hit, then Decide) next to the baseline of a plain
// map and the same checks, measured in the same run; it reports the ratio.
func BenchmarkCachedVerifyAndDecide(b *testing.B) {
	f := newHotFixture(b)
	v := benchView(10_000)
	plain := newPlainView(v, f)
	req := fetchReq(42)
	var hotNs, plainNs float64
	b.Run("cache+decide", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c, ok := f.cache.Get(f.token, t0)
			if !ok || Decide(c, req, v, t0) != Allow {
				b.Fatal("refused")
			}
		}
		hotNs = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	b.Run("baseline-plain-map", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !plain.authorize(f.token, req, t0) {
				b.Fatal("refused")
			}
		}
		plainNs = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	b.Logf("cache+decide %.0f ns/op, plain map + checks %.0f ns/op: ratio %.2f", hotNs, plainNs, hotNs/plainNs)
}

// bulkUpdates are a view's first reset (200 partitions of one topic and
// 10,000 of another fenced at epoch 1) and then the update a revoke of
// the member holding the 10,000 brings: the same again at epoch 2, as a
// reset (the sync log compacted past the gateway) and as a delta.
func bulkUpdates() (first, reset, delta api.SyncResponse) {
	first = api.SyncResponse{Seq: 1, Reset: true} // in the coordinator's order: group, topic, partition
	for p := range 10_000 {
		first.Fences = append(first.Fences, api.Fence{Group: "bulk-g", Topic: "bulk", Partition: int32(p), Epoch: 1})
	}
	for p := range 200 {
		first.Fences = append(first.Fences, api.Fence{Group: "g", Topic: "small", Partition: int32(p), Epoch: 1})
	}
	reset = api.SyncResponse{Seq: 2, Reset: true, Fences: slices.Clone(first.Fences)}
	delta = api.SyncResponse{Seq: 2}
	for i := range 10_000 {
		reset.Fences[i].Epoch = 2
		delta.Fences = append(delta.Fences, reset.Fences[i])
	}
	return first, reset, delta
}

// BenchmarkApplyBulk: what applying a revoke of a member holding 10,000
// partitions costs a gateway's view (held under its write lock, so every
// fetch's check waits for it), as a reset and as a delta; "delta-new" is
// the delta to a view that held no fence of the 10,000 before (their
// first revoke: BENCHMARKS §3's bulk fence), so every one is a new key.
func BenchmarkApplyBulk(b *testing.B) {
	first, reset, delta := bulkUpdates()
	small := api.SyncResponse{Seq: 1, Reset: true, Fences: first.Fences[10_000:]}
	for _, c := range []struct {
		name  string
		first api.SyncResponse
		u     api.SyncResponse
	}{{"reset", first, reset}, {"delta", first, delta}, {"delta-new", small, delta}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				v := newView()
				if _, err := v.Apply(c.first, t0); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				ch, err := v.Apply(c.u, t0)
				if err != nil || len(ch.Raised) != 10_000 {
					b.Fatalf("raised %d, %v", len(ch.Raised), err)
				}
			}
		})
	}
}

// BenchmarkCheckDuringBulkApply: the longest a fetch's check (Decide, on
// a partition of another topic) waits while the view applies a revoke
// of a member holding 10,000 partitions, new fences, as a delta: one
// goroutine checks in a loop and keeps its slowest check while the
// other applies. The extra metric is that slowest check, per Apply.
func BenchmarkCheckDuringBulkApply(b *testing.B) {
	first, _, delta := bulkUpdates()
	small := api.SyncResponse{Seq: 1, Reset: true, Fences: first.Fences[10_000:]}
	c := capability()
	req := fetchReq(42)
	var worst time.Duration
	for b.Loop() {
		b.StopTimer()
		v := newView()
		if _, err := v.Apply(small, t0); err != nil {
			b.Fatal(err)
		}
		stop, done := make(chan struct{}), make(chan time.Duration)
		go func() {
			var most time.Duration
			for {
				select {
				case <-stop:
					done <- most
					return
				default:
				}
				start := time.Now()
				if Decide(c, req, v, t0) != Allow {
					panic("refused")
				}
				most = max(most, time.Since(start))
			}
		}()
		b.StartTimer()
		if _, err := v.Apply(delta, t0); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		close(stop)
		worst = max(worst, <-done)
		b.StartTimer()
	}
	b.ReportMetric(float64(worst.Microseconds()), "worst-check-µs")
}
