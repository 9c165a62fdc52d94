package sim

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// fullTable fills limits.gateways with a sync-token holder's ids: the
// table holds the world's gateways and two more, the rogue polls under
// four ids every 500 ms without acknowledging, and the world's gateways
// restart (every 45 s on average) under new ids without leaving their
// old ones, and get stuck applying nothing for up to three times
// gateway_timeout.
func fullTable(p *profile) {
	p.rogueEvery, p.rogueIDs = 500*time.Millisecond, 4
	p.gatewayNewIDs = true
	p.gatewayCrash, p.gatewayDown = 45*time.Second, 2*time.Second
	p.stuckEvery, p.stuckMax = 30*time.Second, 3*p.machine.GatewayTimeout
	p.machine.Limits.Gateways = p.gateways + 2
}

// recoveringLaggards: no rogue; the table holds exactly the world's
// gateways, which restart under new ids every 20 s on average and get
// stuck every 5 s for up to three times gateway_timeout, with reordering
// delays of up to 3 s: a new id takes the place of a stuck gateway that
// lagged longer than gateway_timeout, which may recover (apply an answer)
// just before, its acknowledging poll still on the wire, and with no
// other gateway lagging nothing but the bound holds the next fence back.
func recoveringLaggards(p *profile) {
	p.rogueEvery = 0
	p.gatewayNewIDs = true
	p.gatewayCrash, p.gatewayDown = 20*time.Second, time.Second
	p.stuckEvery, p.stuckMax = 5*time.Second, 3*p.machine.GatewayTimeout
	p.machine.Limits.Gateways = p.gateways
	p.net.delay, p.net.delayMax = 0.05, 3*time.Second
}

// fillTotals sums what a scenario's seeds exercised.
type fillTotals struct {
	handoffs, forgotten, refused, newIDs, synced, waitMax atomic.Int64
}

func (f *fillTotals) add(r Result) {
	f.handoffs.Add(int64(r.Stats.Handoffs))
	f.forgotten.Add(int64(r.Stats.ForgottenForLag))
	f.refused.Add(int64(r.Stats.GatewayRefused))
	f.newIDs.Add(int64(r.Stats.NewIDs))
	f.synced.Add(int64(r.Stats.NewIDsSynced))
	for w := int64(r.Stats.NewIDWaitMax); ; {
		if old := f.waitMax.Load(); w <= old || f.waitMax.CompareAndSwap(old, w) {
			break
		}
	}
}

func (f *fillTotals) String() string {
	return fmt.Sprintf("%d handoffs, %d ids forgotten for lagging, %d polls of the world's gateways refused, %d restarts under new ids, %d synced before the heal, longest wait %s",
		f.handoffs.Load(), f.forgotten.Load(), f.refused.Load(), f.newIDs.Load(), f.synced.Load(), time.Duration(f.waitMax.Load()))
}

// runFill runs seeds first.. first+n-1 with tune, requiring every checker
// to hold (no handoff floors: under serve every handoff may wait for
// expiry, and a refused gateway serves nothing).
func runFill(t *testing.T, name string, first, n uint64, tune func(*profile)) *fillTotals {
	f := new(fillTotals)
	t.Run(name, func(t *testing.T) {
		for seed := first; seed < first+n; seed++ {
			t.Run(fmt.Sprint(seed), func(t *testing.T) {
				t.Parallel()
				r := Run(seed, Options{tune: tune})
				if r.Err != nil {
					t.Errorf("%v\nreplay: go test ./e2e/sim/ -run '%s/%d$' -v", r.Err, t.Name()[:len(t.Name())-len(fmt.Sprint(seed))-1], seed)
				}
				f.add(r)
			})
		}
	})
	t.Logf("%s: %s", name, f)
	return f
}

// TestFullGatewayTableHoldsTheInvariants: a rogue fleet of gateway ids
// keeps limits.gateways full while the world's gateways restart under
// new ids, through every checker (one reader per partition, a revoked
// capability never served, grants only once every gateway process is
// safe — checker 4's ground truth, not the coordinator's rule — ...),
// under both silent_gateways settings. Under fence ids lagging longer
// than gateway_timeout are forgotten to make room and restarts under new
// ids get in during the faulty phase (without the change none did but
// by a silent old id's place, which the rogue races them for); under
// serve nothing is forgotten for lagging, and a restarted gateway may be
// refused until the heal (the rogue and the dead ids leave then).
func TestFullGatewayTableHoldsTheInvariants(t *testing.T) {
	t.Parallel()
	for _, serve := range []bool{false, true} {
		f := runFill(t, fmt.Sprintf("serve=%t", serve), 8001, 30, func(p *profile) {
			if serve {
				serving(p)
			}
			fullTable(p)
			p.rogueStale = p.gateways%2 == 0
		})
		switch {
		case f.handoffs.Load() == 0 || f.newIDs.Load() == 0 || f.refused.Load() == 0:
			t.Errorf("serve %t: %s: the case was not exercised", serve, f)
		case !serve && (f.forgotten.Load() == 0 || f.synced.Load() == 0):
			t.Errorf("fence: %s: no gateway got in by a lagging id's place", f)
		case serve && f.forgotten.Load() != 0:
			t.Errorf("serve: %d gateway ids forgotten for lagging", f.forgotten.Load())
		}
	}
}

// TestRecoveringLaggardsForgottenHoldTheInvariants runs the case that
// makes the lag rule's bound after a forget necessary (lag.go,
// forgetLaggingGateway) through every checker: real gateways forgotten
// for lagging, some just as they recover. With the bound off (lagBound
// false) checker 4 (grant safety: a gateway process not safe for the
// fence) fails 14 of these 100 seeds.
func TestRecoveringLaggardsForgottenHoldTheInvariants(t *testing.T) {
	t.Parallel()
	f := runFill(t, "fence", 9001, 100, recoveringLaggards)
	if f.forgotten.Load() == 0 || f.handoffs.Load() == 0 {
		t.Errorf("%s: the case was not exercised", f)
	}
}
