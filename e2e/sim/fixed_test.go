package sim

import (
	"fmt"
	"testing"
	"time"
)

// Bugs the simulation found in packages other than the ones it drives
// directly, fixed since; each test now expects no failure with the faults
// that exposed the bug made frequent.

// TestDeniedCapabilityReleased was the known bug of the consumer session
// with the coordinator shell: an admin denies the jti of a holder's
// capability; gateways refuse it (409), no fence, the coordinator still
// owns the partition to the holder; the session releases with that same
// capability, which the shell refused too (its own deny-list), so the
// machine's give-up path never ran and nobody read the partition again
// (checker 5: lost records; 28 of 2,000 seeds). Fixed in
// coordinator/commit.go: a denied capability may still release. With
// denials made frequent, no seed loses a record now.
func TestDeniedCapabilityReleased(t *testing.T) {
	t.Parallel()
	denials := func(p *profile) { p.denyJTI, p.adminEvery = true, 10*time.Second }
	for seed := uint64(1); seed <= 60; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			if r := Run(seed, Options{tune: denials}); r.Err != nil {
				t.Fatalf("seed %d: %v", seed, r.Err)
			}
		})
	}
}
