package sim

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// unfitSeeds is how many seeds of each unfit kind TestSimUnfitReplica
// runs (CAPGATE_SIM_UNFIT_SEEDS: more).
const unfitSeeds = 24

// TestSimUnfitReplica runs replicas' seeds whose unfit replica (unfit.go)
// is misconfigured or broken, every checker after every event — the
// liveness checker "a fit replica leads" among them — and requires that
// the fault happened: the misconfigured replica found itself unfit and
// never led, the broken one's takeovers failed after their barriers.
// With the once-only barrier rule of leader.Replica.Observe off, the
// broken seeds fail "a fit replica leads" (the report of the simbarrier
// branch names them).
func TestSimUnfitReplica(t *testing.T) {
	t.Parallel()
	n := unfitSeeds
	if s := os.Getenv("CAPGATE_SIM_UNFIT_SEEDS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			t.Fatalf("CAPGATE_SIM_UNFIT_SEEDS: %v", err)
		}
	}
	for _, mode := range []unfitMode{unfitMisconfigured, unfitBroken} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			var sum Stats
			var seeds, failed []uint64
			var longest time.Duration
			for seed := uint64(1); len(seeds) < n; seed++ {
				if drawUnfit(seed, replicaOptions().Replicas).mode != mode {
					continue
				}
				seeds = append(seeds, seed)
				r, w := runWorld(seed, replicaOptions())
				if r.Err != nil {
					failed = append(failed, seed)
				}
				report(t, r)
				longest = max(longest, w.live.longst)
				sum.UnfitMarked += r.Stats.UnfitMarked
				sum.BrokenTakeovers += r.Stats.BrokenTakeovers
				sum.Takeovers += r.Stats.Takeovers
			}
			t.Logf("%s: %d seeds (%d..%d); failed %d: %v; takeovers %d, unfit marks %d, broken takeovers %d, longest leaderless stretch %s",
				mode, len(seeds), seeds[0], seeds[len(seeds)-1], len(failed), failed, sum.Takeovers, sum.UnfitMarked, sum.BrokenTakeovers, longest)
			switch {
			case mode == unfitMisconfigured && sum.UnfitMarked == 0:
				t.Error("the misconfigured replica never found itself unfit")
			case mode == unfitBroken && sum.BrokenTakeovers == 0:
				t.Error("the broken replica never failed a takeover after its barrier")
			}
		})
	}
}

// TestDrawUnfit: the unfit replica is the seed's, the same every time,
// and both kinds (and none) occur.
func TestDrawUnfit(t *testing.T) {
	count := map[unfitMode]int{}
	for seed := uint64(1); seed <= 200; seed++ {
		u := drawUnfit(seed, 3)
		if u != drawUnfit(seed, 3) || u.idx < 0 || u.idx >= 3 {
			t.Fatalf("seed %d: %+v", seed, u)
		}
		count[u.mode]++
	}
	if count[unfitNone] == 0 || count[unfitMisconfigured] == 0 || count[unfitBroken] == 0 {
		t.Fatalf("kinds drawn: %v", count)
	}
	if u := drawUnfit(5, 1); u.mode != unfitNone {
		t.Fatalf("a single coordinator drew %+v", u)
	}
}

// TestReplicaUncountedBarriersCaught plants the bug the sim itself had:
// the shell steps the follower's position without its Barriers, so every
// barrier reads as a live leader's write (the rule before the once-only
// barrier rule). A broken replica standing first after every silence
// then keeps every fit follower from standing, and checker 9 ("a fit
// replica leads") catches it; without the bug the same seeds hold
// (TestSimUnfitReplica, TestSimReplicas).
func TestReplicaUncountedBarriersCaught(t *testing.T) {
	t.Parallel()
	caught := plantedFailureWith(t, replicaOptions(), bugs{barriersUncounted: true}, nil, "a fit replica leads", nil)
	if !strings.Contains(caught.Detail, "(broken)") {
		t.Fatalf("caught on a seed without a broken replica: %v", caught)
	}
	t.Logf("caught by %q: %v", caught.Checker, caught)
}
