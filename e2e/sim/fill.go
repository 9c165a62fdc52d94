package sim

import (
	"strconv"

	"github.com/capgate/capgate/coordinator/group"
)

// A full gateway table (coordinator/group/gateways.go, lag.go): a
// sync-token holder polls under many gateway ids without acknowledging
// (profile.rogueIDs), filling limits.gateways, while the world's gateways
// restart under new ids (profile.gatewayNewIDs) and must get in. Under
// silent_gateways: fence a new id takes the place of an id that lagged
// longer than gateway_timeout — and the lag rule's bound then holds every
// fence for gateway_timeout, which checker 4 (grant safety, ground truth
// per gateway process) would catch missing.

// rogueName is the k-th id of the rogue fleet.
func rogueName(k int) string { return "rogue-" + strconv.Itoa(k) }

// gatewayName is the gateway id a sync poll or leave names.
func (req *request) gatewayName() string {
	if req.name != "" {
		return req.name
	}
	return gatewayID(req.gateway)
}

// rogueFleetPoll sends one poll under each of the rogue fleet's ids, as
// roguePoll does under "rogue": after=0, or with rogueStale the seq of
// that id's first answer. A refused poll (the table is full) changes
// nothing; the fleet polls again next time.
func (w *World) rogueFleetPoll() {
	if w.rogueAfters == nil {
		w.rogueAfters = make(map[string]uint64, w.prof.rogueIDs)
	}
	for k := range w.prof.rogueIDs {
		name := rogueName(k)
		w.stats.RoguePolls++
		req := &request{kind: reqSync, from: w.adminNode(), gateway: rogueGateway, name: name, after: w.rogueAfters[name],
			wait: w.prof.gateway.syncWait, call: call{deadline: w.now + w.prof.gateway.syncTimeout}, reply: func(r response) {
				if w.prof.rogueStale && w.rogueAfters[name] == 0 && !r.transport && r.code == "" {
					w.rogueAfters[name] = r.sync.Seq
				}
			}}
		w.sendCoordinator(w.adminNode(), true, req)
	}
}

// newIDBooted notes a gateway restarting under a new id in the faulty
// phase.
func (w *World) newIDBooted(g *gateway) {
	g.bootedAt = -1
	if !w.healed {
		w.stats.NewIDs++
		g.bootedAt = w.now
	}
}

// newIDSynced notes a gateway's first sync under a new id.
func (w *World) newIDSynced(g *gateway) {
	if g.bootedAt < 0 {
		return
	}
	if !w.healed {
		w.stats.NewIDsSynced++
	}
	w.stats.NewIDWaitMax = max(w.stats.NewIDWaitMax, w.now-g.bootedAt)
	g.bootedAt = -1
}

// leaveOldIDs: under silent_gateways serve a silent gateway id is never
// forgotten, so at the heal the operator removes the ids the world's
// gateways left behind when they restarted under new ones (each process
// is dead), or the drain could find the table full of them.
func (w *World) leaveOldIDs() {
	if w.prof.machine.SilentGateways != group.SilentGatewaysServe {
		return
	}
	for _, g := range w.gateways {
		for _, id := range g.oldIDs {
			w.leaveOnBehalf(id)
		}
		g.oldIDs = nil
	}
}
