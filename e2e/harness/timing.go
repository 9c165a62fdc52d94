package harness

import "github.com/capgate/capgate/internal/stack"

// Timing is a cluster's clock settings (see stack.Timing).
type Timing = stack.Timing

// DefaultTiming fits a fault suite and a loaded 2-core machine: sessions
// of 1.5s, gateway_timeout 3s, sync_timeout 2s, sync polls held 0.5s.
func DefaultTiming() Timing { return stack.TestTiming() }

// ParamsOf are the checkers' parameters for a cluster with timing tm.
func ParamsOf(tm Timing) Params {
	return Params{
		SessionTimeout: tm.SessionTimeout, HandoffTimeout: tm.HandoffTimeout, GatewayTimeout: tm.GatewayTimeout,
		MaxClockSkew: tm.MaxClockSkew, Leeway: tm.Leeway, TraceSlack: DefaultTraceSlack,
	}
}
