package harness

import (
	"fmt"
	"time"
)

// Timing is the clock settings of a cluster: short so a fault test fits in
// seconds, consistent with every rule the parts check (heartbeat_wait <
// capability_lease/2, sync_wait < sync_timeout, sync_wait_max <
// gateway_timeout − max_clock_skew) and the two no part checks alone:
// sync_timeout < gateway_timeout − max_clock_skew, and 2×sync_wait <
// sync_timeout.
type Timing struct {
	// CapabilityLease is the lifetime of granted capabilities (≥ 2s).
	CapabilityLease time.Duration
	// HeartbeatWait caps a held heartbeat (coordinator); members wait at
	// most half their session.
	HeartbeatWait time.Duration
	// SessionTimeout is the members' session timeout (≥ 1s).
	SessionTimeout time.Duration
	// HandoffTimeout bounds how long a revoke waits for the release.
	HandoffTimeout time.Duration
	// GatewayTimeout: a gateway silent this long counts as safe.
	GatewayTimeout time.Duration
	// MaxClockSkew is the coordinator's clock-skew allowance.
	MaxClockSkew time.Duration
	// SyncWait is how long a sync poll is held (gateway and coordinator).
	SyncWait time.Duration
	// SyncTimeout: a gateway without a good sync this long refuses (503).
	SyncTimeout time.Duration
	// Leeway is the token leeway of coordinator and gateways.
	Leeway time.Duration
}

// DefaultTiming fits a fault suite and a loaded 2-core machine: sessions
// of 1.5s, gateway_timeout 3s, sync_timeout 2s, sync polls held 0.5s.
func DefaultTiming() Timing {
	return Timing{
		CapabilityLease: 4 * time.Second,
		HeartbeatWait:   time.Second,
		SessionTimeout:  1500 * time.Millisecond,
		HandoffTimeout:  3 * time.Second,
		GatewayTimeout:  3 * time.Second,
		MaxClockSkew:    500 * time.Millisecond,
		SyncWait:        500 * time.Millisecond,
		SyncTimeout:     2 * time.Second,
		Leeway:          time.Second,
	}
}

// Validate checks the rule the parts cannot check alone, and that
// members can heartbeat within their session.
func (tm Timing) Validate() error {
	switch {
	case tm.SyncTimeout >= tm.GatewayTimeout-tm.MaxClockSkew:
		return fmt.Errorf("harness: timing: sync_timeout %v must be < gateway_timeout %v − max_clock_skew %v", tm.SyncTimeout, tm.GatewayTimeout, tm.MaxClockSkew)
	case 2*tm.SyncWait >= tm.SyncTimeout:
		// A healthy idle gateway's last good poll was sent up to two held
		// polls ago: at 2×sync_wait ≥ sync_timeout it refuses for a moment
		// after every second poll (see the report on gateway sync).
		return fmt.Errorf("harness: timing: 2×sync_wait %v must be < sync_timeout %v", 2*tm.SyncWait, tm.SyncTimeout)
	case tm.SessionTimeout < time.Second:
		return fmt.Errorf("harness: timing: session_timeout %v must be ≥ 1s", tm.SessionTimeout)
	}
	return nil
}

// Params are the checkers' parameters for this timing.
func (tm Timing) Params() Params {
	return Params{
		SessionTimeout: tm.SessionTimeout, HandoffTimeout: tm.HandoffTimeout, GatewayTimeout: tm.GatewayTimeout,
		MaxClockSkew: tm.MaxClockSkew, Leeway: tm.Leeway, TraceSlack: DefaultTraceSlack,
	}
}

// memberHeartbeatWait is what members ask the coordinator to hold their
// heartbeats for: well inside the session.
func (tm Timing) memberHeartbeatWait(session time.Duration) time.Duration {
	return min(tm.HeartbeatWait, session/2)
}
