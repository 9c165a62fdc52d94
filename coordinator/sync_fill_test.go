package coordinator_test

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// forgottenWarnings counts the WARN entries reporting gateway id
// forgotten for lagging.
func forgottenWarnings(e *env, id string) int {
	return gatewayWarnings(e, "gateway forgotten for lagging", id)
}

// TestLaggingGatewayIDsMakeRoomOverHTTP is the attack over HTTP: sync-token
// holders fill groups.limits.gateways with ids that poll GET /v1/sync
// without ever acknowledging (after=0: a reset each time). They are never
// silent, so before this every new gateway id was refused 409
// limit_exceeded for as long as they polled: a real gateway restarting
// under a new id could not sync, so it could not serve and revocations
// could not reach it. Now, once they have lagged longer than
// gateway_timeout (the clock jumps twice that), a new gateway registers
// (a reset), acknowledges and is held like any in-sync gateway; the
// admin view lists it in place of the id lagging longest; the WARN names
// that id once and capgate_coordinator_gateways_forgotten_for_lag_total
// counts it. The gateway in sync all along is never forgotten, and once
// the table holds only acknowledging gateways a new id is refused again.
func TestLaggingGatewayIDsMakeRoomOverHTTP(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	e.cfg.Groups.Limits.Gateways = 3
	e.cfg.Groups.GatewayTimeout = time.Minute // only the jumps decide
	e.cfg.Groups.SessionTimeout = 5 * time.Minute
	e.cfg.CapabilityLease = 5 * time.Minute
	var skip atomic.Int64
	h := e.start(t, coordinator.WithClock(func() time.Time { return time.Now().Add(time.Duration(skip.Load())) }))
	gw1 := newGateway(h, "gw1")
	gw1.run(200)
	defer gw1.halt()
	creds := h.clientCredential(t, []string{"g"}, []string{"orders"})
	h.join(t, "g", creds, api.JoinRequest{Topics: []string{"orders"}})
	_, stop1 := rogueGateway(t, h, "rogue-1", false)
	_, stop2 := rogueGateway(t, h, "rogue-2", false)
	stopRogues := sync.OnceFunc(func() { stop1(); stop2() })
	defer stopRogues()
	refusedGateway(t, h, "gw2") // the table is full of pollers

	skip.Add(int64(2*e.cfg.Groups.GatewayTimeout + time.Second))
	eventually(t, func() string {
		for _, id := range []string{"rogue-1", "rogue-2"} {
			if gw := gatewayView(t, h, id); !gw.Lagging || gw.Silent {
				return fmt.Sprintf("%s %+v, want lagging, polling since the jump", id, gw)
			}
		}
		return ""
	})
	stopRogues()

	gw2 := newGateway(h, "gw2")
	reset := gw2.poll(t, 0, 0)
	if !reset.Reset {
		t.Fatalf("new gateway gw2: %+v, want a reset snapshot", reset)
	}
	gw2.run(200) // acknowledges the reset, then is held
	defer gw2.halt()
	eventually(t, func() string {
		if gw := gatewayView(t, h, "gw2"); gw.Acked < reset.Seq || gw.Lagging {
			return fmt.Sprintf("gw2 %+v, want it acknowledging seq %d", gw, reset.Seq)
		}
		return ""
	})
	if ids := gatewayIDList(t, h); !slices.Equal(ids, []string{"gw1", "gw2", "rogue-2"}) {
		t.Fatalf("gateways after gw2 came: %v, want rogue-1 (lagging longest) forgotten", ids)
	}
	if n := h.metric(t, "capgate_coordinator_gateways_forgotten_for_lag_total"); n != 1 {
		t.Fatalf("capgate_coordinator_gateways_forgotten_for_lag_total %v, want 1", n)
	}
	if n, other := forgottenWarnings(e, "rogue-1"), forgottenWarnings(e, "rogue-2"); n != 1 || other != 0 {
		t.Fatalf("forgotten warnings: rogue-1 %d, rogue-2 %d; want one for rogue-1", n, other)
	}

	newGateway(h, "gw3").poll(t, 0, 0) // rogue-2 lagged as long: it makes room too
	if ids := gatewayIDList(t, h); !slices.Equal(ids, []string{"gw1", "gw2", "gw3"}) {
		t.Fatalf("gateways after gw3 came: %v", ids)
	}
	refusedGateway(t, h, "rogue-1") // back as new: nobody lags long enough
	e.checkLogs(t)
}
