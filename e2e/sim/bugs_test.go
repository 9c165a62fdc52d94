package sim

import (
	"testing"
	"time"
)

// TestPlantedBugsAreCaught plants one bug at a time and checks that the
// checker meant for it fires within a few seeds, and that nothing else
// does: each checker can fail, and fails for the right reason.
func TestPlantedBugsAreCaught(t *testing.T) {
	t.Parallel()
	cuts := func(p *profile) { p.cutEvery, p.cutMax = 10*time.Second, 30*time.Second }
	crashes := func(p *profile) { p.readyCrash = 0.02 }
	stalls := func(p *profile) { p.net.stall, p.net.stallMax = 0.1, 5*time.Second }
	cases := []struct {
		name    string
		bugs    bugs
		tune    func(*profile)
		checker string
		also    []string // checkers the bug may trip first
	}{
		// Each bug sits in the real shell code the simulation runs
		// (gateway/guard, coordinator/driver, client/driver), switched on
		// by its package's Bugs; the last is new since the simulation runs
		// the shells: the in-flight registry cancels nothing on a
		// revocation, so the acknowledgement goes out while fetches under
		// the fenced epoch still run.
		{"gateway self-fence off (guard.Follower)", bugs{noSelfFence: true}, cuts, "exclusive reader", nil},
		{"coordinator sends what it failed to persist (coordinator/driver)", bugs{sendBeforePersist: true}, crashes, "epochs only rise", []string{"grant safety", "committed offsets", "handoff duplicates"}},
		{"gateway acknowledges before it applies (guard.Follower)", bugs{ackBeforeApply: true}, nil, "acked fence", []string{"exclusive reader"}},
		{"gateway_timeout below sync_timeout (config)", bugs{shortGatewayTimeout: true}, cuts, "grant safety", []string{"exclusive reader"}},
		{"gateways serve while cut off, the coordinator counts their silence (config)", bugs{serveCountedSilent: true}, serving, "grant safety", []string{"exclusive reader"}},
		{"consumer commits past what it processed (client/driver)", bugs{commitAhead: true}, nil, "no lost record", []string{"committed offsets", "handoff duplicates"}},
		{"persist mapping drops committed offsets (coordinator/driver)", bugs{storeLosesOffsets: true}, crashes, "committed offsets", []string{"handoff duplicates"}},
		// A cancelled fetch's late records handed over may also show as a
		// delivery past the one before it (seed 1 since joins draw keys
		// from the world's rng: "delivered from 138 …, expected 137").
		{"consumer delivers a cancelled fetch (client/driver)", bugs{deliverAfterRevoke: true}, nil, "handoff duplicates", []string{"committed offsets"}},
		{"revocation cancels no fetch in flight (guard.Registry)", bugs{keepVictims: true}, nil, "acked fence", []string{"exclusive reader"}},
		// A join's repeat (delivered twice, or landing after the retry its
		// sender sent on giving up) taken as a new join: a second member,
		// the first heartbeated by nobody until its session runs out.
		{"coordinator ignores a join's Idempotency-Key (join handler)", bugs{joinKeyIgnored: true}, stalls, "one member per join", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			caught := plantedFailure(t, c.bugs, c.tune, c.checker, c.also)
			t.Logf("caught by %q: %v", c.checker, caught)
		})
	}
}

// plantedFailure runs seeds with the bug until the wanted checker fires
// and returns that failure; a checker outside want+also fails the test.
func plantedFailure(t *testing.T, b bugs, tune func(*profile), want string, also []string) *Failure {
	t.Helper()
	return plantedFailureWith(t, ciOptions(), b, tune, want, also)
}

// plantedFailureWith is plantedFailure on top of base options.
func plantedFailureWith(t *testing.T, base Options, b bugs, tune func(*profile), want string, also []string) *Failure {
	t.Helper()
	const seeds = 40
	for seed := uint64(1); seed <= seeds; seed++ {
		opts := base
		opts.bugs = b
		if ci := opts.tune; tune != nil {
			opts.tune = func(p *profile) {
				if ci != nil {
					ci(p)
				}
				tune(p)
			}
		}
		r := Run(seed, opts)
		if r.Err == nil {
			continue
		}
		f, ok := r.Err.(*Failure)
		switch {
		case !ok:
			t.Fatalf("seed %d: %v", seed, r.Err)
		case f.Checker == want:
			return f
		case !contains(also, f.Checker):
			t.Fatalf("seed %d: the planted bug tripped %q, not %q: %v", seed, f.Checker, want, f)
		}
	}
	t.Fatalf("no seed of %d tripped %q", seeds, want)
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
