package sim

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// laggards makes gateway ids that poll without acknowledging frequent:
// gateways stuck applying nothing every 20 s on average, for up to twice
// gateway_timeout, and a rogue sync-token holder polling every 300 ms.
func laggards(p *profile) {
	p.stuckEvery, p.stuckMax = 20*time.Second, 2*p.machine.GatewayTimeout
	p.rogueEvery = 300 * time.Millisecond
}

// TestLaggingGatewaysHoldTheInvariants runs seeds with frequent gateways
// that poll without acknowledging (the lag rule,
// coordinator/group/lag.go) through every checker, under both
// silent_gateways settings: a stuck gateway (the real follower: every
// answer fails to apply, it polls on with the same after and self-fences
// after sync_timeout) must not let a grant through while it may still
// serve the old epoch (checker 4's gatewaySafe is ground truth, not the
// coordinator's rule), and a rogue poller (after=0 or a stale after) must
// not stall the handoffs under fence (the per-seed floors of handoffs
// hold; they did not before the rule). Under fence the rule must have
// fired; under serve it never does, and the rogue holds every handoff
// until the revoked capabilities expire (so no floors there: every
// checker holds, which is the point).
func TestLaggingGatewaysHoldTheInvariants(t *testing.T) {
	t.Parallel()
	const seeds = 30
	for _, serve := range []bool{false, true} {
		var handoffs, stuck, safe atomic.Int64
		t.Run(fmt.Sprintf("serve=%t", serve), func(t *testing.T) {
			for seed := uint64(1); seed <= seeds; seed++ {
				t.Run(fmt.Sprint(seed), func(t *testing.T) {
					t.Parallel()
					r := Run(seed+7000, Options{tune: func(p *profile) {
						if serve {
							serving(p)
						}
						laggards(p)
						p.rogueStale = seed%2 == 0
					}})
					if serve && r.Err != nil { // every handoff waits for expiry: no floors
						t.Errorf("%v", r.Err)
					} else if !serve {
						report(t, r)
					}
					handoffs.Add(int64(r.Stats.Handoffs))
					stuck.Add(int64(r.Stats.GatewayStuck))
					safe.Add(int64(r.Stats.SafeByLag))
				})
			}
		})
		switch {
		case handoffs.Load() == 0 || stuck.Load() == 0:
			t.Errorf("serve %t: %d handoffs, %d stuck gateways: the case was not exercised", serve, handoffs.Load(), stuck.Load())
		case !serve && safe.Load() == 0:
			t.Errorf("fence: no gateway counted safe by lag in %d seeds", seeds)
		case serve && safe.Load() != 0:
			t.Errorf("serve: %d gateways counted safe by lag", safe.Load())
		}
		t.Logf("serve %t: %d handoffs, %d stuck gateways, %d safe by lag", serve, handoffs.Load(), stuck.Load(), safe.Load())
	}
}
