package sim

import (
	"testing"
	"time"
)

// TestPlantedBugsAreCaught plants one bug at a time and checks that the
// checker meant for it fires within a few seeds, and that nothing else
// does: each checker can fail, and fails for the right reason.
func TestPlantedBugsAreCaught(t *testing.T) {
	cuts := func(p *profile) { p.cutEvery, p.cutMax = 10*time.Second, 30*time.Second }
	crashes := func(p *profile) { p.readyCrash = 0.02 }
	cases := []struct {
		name    string
		bugs    bugs
		tune    func(*profile)
		checker string
		also    []string // checkers the bug may trip first
	}{
		{"gateway self-fence off", bugs{noSelfFence: true}, cuts, "exclusive reader", nil},
		{"coordinator sends before it persists", bugs{sendBeforePersist: true}, crashes, "epochs only rise", []string{"grant safety", "committed offsets", "handoff duplicates"}},
		{"gateway acknowledges before it applies", bugs{ackBeforeApply: true}, nil, "acked fence", []string{"exclusive reader"}},
		{"gateway_timeout below sync_timeout", bugs{shortGatewayTimeout: true}, cuts, "grant safety", []string{"exclusive reader"}},
		{"consumer commits past what it processed", bugs{commitAhead: true}, nil, "no lost record", []string{"committed offsets", "handoff duplicates"}},
		{"store loses committed offsets", bugs{storeLosesOffsets: true}, crashes, "committed offsets", []string{"handoff duplicates"}},
		{"consumer delivers a cancelled fetch", bugs{deliverAfterRevoke: true}, nil, "handoff duplicates", nil},
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
	const seeds = 40
	for seed := uint64(1); seed <= seeds; seed++ {
		opts := ciOptions()
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
