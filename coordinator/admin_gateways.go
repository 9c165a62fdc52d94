package coordinator

// Behavior: GET /v1/admin/gateways — bearer: an admin token. Every gateway
// the coordinator knows (it polled and neither left nor was forgotten to
// make room for a new id past groups.limits.gateways, which only a gateway
// silent longer than gateway_timeout under silent_gateways fence can be),
// sorted by id: the sync seq it acknowledged, how far
// behind the current seq that is, when it last polled, whether it is
// silent (longer than groups.gateway_timeout), whether it is lagging (it
// polls, but has not acknowledged a sync entry appended more than
// gateway_timeout ago: the lag rule, group/lag.go) and since when it has
// not acknowledged (unacked_since: the oldest entry above its ack was
// appended then, or earlier; absent when it acknowledged everything);
// and groups.silent_gateways, which says what silence and lag mean: with
// "fence" a silent gateway refuses fetches itself and counts safe for
// every fence, a lagging one for every fence older than gateway_timeout;
// with "serve" it keeps serving and neither makes it safe. conflicts and
// last_conflict (absent when none) count the polls and leaves of another
// gateway process refused 409 under the id since the coordinator made
// the record: two gateways share a gateway.id.

import (
	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/coordinator/group"
)

func (c *Coordinator) handleAdminGateways(ctx *fasthttp.RequestCtx, _ []string) {
	var gateways []group.GatewayDescription
	var lags map[string]group.GatewayLag
	var seq uint64
	if err := c.query(func(m *group.Machine) { gateways, lags, seq = m.Gateways(), m.GatewayLags(), m.SyncSeq() }); err != nil {
		writeMachineError(ctx, nil, err)
		return
	}
	out := GatewaysResponse{Seq: seq, SilentGateways: c.cfg.Groups.SilentGateways, Gateways: make([]GatewayView, 0, len(gateways))}
	for _, gw := range gateways {
		lag := uint64(0)
		if seq > gw.Acked {
			lag = seq - gw.Acked
		}
		v := GatewayView{ID: gw.ID, Acked: gw.Acked, Lag: lag, LastSeen: timeText(gw.LastSeen), Silent: gw.Silent, Lagging: lags[gw.ID].Lagging}
		if since := lags[gw.ID].UnackedSince; !since.IsZero() {
			v.UnackedSince = timeText(since)
		}
		if gw.Conflicts > 0 {
			v.Conflicts, v.LastConflict = gw.Conflicts, timeText(gw.LastConflict)
		}
		out.Gateways = append(out.Gateways, v)
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
}
