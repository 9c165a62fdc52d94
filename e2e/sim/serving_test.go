package sim

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capgate/capgate/coordinator/group"
)

// serving puts the seed's coordinator in silent_gateways: serve (gateways
// keep serving unexpired capabilities while cut off) with frequent long
// cuts between gateways and the coordinator.
//
// No rogue poller: under serve it holds every handoff until the revoked
// capabilities expire (by design: lag never counts as safety there), which
// these seeds' handoff floors do not allow for; TestLaggingGatewaysHoldTheInvariants
// runs it under serve.
func serving(p *profile) {
	p.machine.SilentGateways = group.SilentGatewaysServe
	p.cutEvery, p.cutMax = 10*time.Second, 40*time.Second
	p.rogueEvery = 0
}

// TestServingGatewaysHoldTheInvariants runs seeds where gateways keep
// serving while cut off (issue #11 item 6) through every checker: one
// reader per partition, grants only once every gateway acknowledged the
// fence or the revoked capabilities expired, nothing lost. It must also
// exercise the case: handoffs happen while some gateway is cut off.
func TestServingGatewaysHoldTheInvariants(t *testing.T) {
	t.Parallel()
	const seeds = 60
	var handoffs, partitions atomic.Int64
	for seed := uint64(1); seed <= seeds; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			r := Run(seed+5000, Options{tune: serving})
			report(t, r)
			handoffs.Add(int64(r.Stats.Handoffs))
			partitions.Add(int64(r.Stats.Partitions))
		})
	}
	t.Cleanup(func() {
		if handoffs.Load() == 0 || partitions.Load() == 0 {
			t.Errorf("%d handoffs, %d partitions over %d seeds: the case was not exercised", handoffs.Load(), partitions.Load(), seeds)
		}
	})
}
