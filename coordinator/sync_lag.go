package coordinator

import (
	"go.uber.org/zap"

	"github.com/capgate/capgate/coordinator/group"
)

// reportLagging logs and counts the gateways that began to lag since the
// last Ready (group.Machine.TakeLagging; the lag rule, group/lag.go): a
// gateway id that keeps polling but has not acknowledged a sync entry
// appended more than gateway_timeout ago. One WARN per gateway and
// episode (it ends when the gateway acknowledges everything that old);
// under silent_gateways: fence the gateway is now safe for every fence
// that old, as a silent one is (capgate_coordinator_gateways_safe_by_lag_total),
// under serve revocations keep waiting for it. A gateway forgotten for
// lagging to make room for a new id (group/lag.go forgetLaggingGateway)
// is logged at WARN too and counted
// (capgate_coordinator_gateways_forgotten_for_lag_total). It runs in the
// event loop's goroutine (observer.Sending).
func (c *Coordinator) reportLagging(m *group.Machine) {
	notices, dropped := m.TakeLagging()
	for _, n := range notices {
		fields := []zap.Field{zap.String("gateway", n.Gateway), zap.Uint64("acked_seq", n.Acked), zap.Uint64("seq", n.Seq),
			zap.Time("unacked_since", n.Since), zap.Duration("gateway_timeout", c.cfg.Groups.GatewayTimeout)}
		if n.Forgotten {
			c.metrics.gatewaysForgottenForLag.Inc()
			c.log.Warn("gateway forgotten for lagging: the gateway table is full (groups.limits.gateways) and this id polled without acknowledging "+
				"for longer than gateway_timeout, so a new gateway id took its place; every revocation waits gateway_timeout for the next gateway_timeout "+
				"(it may have just applied an update); if it polls again it is a new gateway; a sync token may be in the wrong hands", fields...)
			continue
		}
		if n.SafeByLag {
			c.metrics.gatewaysSafeByLag.Inc()
			c.log.Warn("gateway lagging: it polls but has not acknowledged sync updates older than gateway_timeout; "+
				"counted safe for them, as a silent gateway (a real gateway refuses fetches after its sync_timeout without an applied update); "+
				"a sync token may be in the wrong hands, or the gateway cannot apply updates", fields...)
			continue
		}
		c.log.Warn("gateway lagging: it polls but has not acknowledged sync updates older than gateway_timeout; "+
			"with silent_gateways serve, revocations wait for its acknowledgement, a leave on its behalf, or the revoked capabilities' expiry; "+
			"a sync token may be in the wrong hands, or the gateway cannot apply updates", fields...)
	}
	if dropped > 0 { // past the machine's bound on notices kept; all alike (the setting decides)
		if c.cfg.Groups.SilentGateways != group.SilentGatewaysServe {
			c.metrics.gatewaysSafeByLag.Add(float64(dropped))
		}
		c.log.Warn("more gateways began lagging than reported", zap.Int("not_reported", dropped))
	}
}
