package coordinator

// Behavior: GET /v1/admin/gateways — bearer: an admin token. Every gateway
// the coordinator knows (it polled and neither left nor was forgotten to
// make room for a new id past groups.limits.gateways, which only a gateway
// silent longer than gateway_timeout under silent_gateways fence can be),
// sorted by id: the sync seq it acknowledged, how far
// behind the current seq that is, when it last polled, and whether it is
// silent (longer than groups.gateway_timeout); and groups.silent_gateways,
// which says what silence means: with "fence" a silent gateway refuses
// fetches itself and counts safe for every fence, with "serve" it keeps
// serving and silence never makes it safe.

import (
	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/coordinator/group"
)

func (c *Coordinator) handleAdminGateways(ctx *fasthttp.RequestCtx, _ []string) {
	var gateways []group.GatewayDescription
	var seq uint64
	if err := c.query(func(m *group.Machine) { gateways, seq = m.Gateways(), m.SyncSeq() }); err != nil {
		writeMachineError(ctx, nil, err)
		return
	}
	out := GatewaysResponse{Seq: seq, SilentGateways: c.cfg.Groups.SilentGateways, Gateways: make([]GatewayView, 0, len(gateways))}
	for _, gw := range gateways {
		lag := uint64(0)
		if seq > gw.Acked {
			lag = seq - gw.Acked
		}
		out.Gateways = append(out.Gateways, GatewayView{ID: gw.ID, Acked: gw.Acked, Lag: lag, LastSeen: timeText(gw.LastSeen), Silent: gw.Silent})
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
}
