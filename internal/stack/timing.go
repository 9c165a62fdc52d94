package stack

import (
	"fmt"
	"time"

	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/gateway"
)

// Timing is the clock settings of a stack. The zero Timing keeps the
// shipped defaults (capgate dev, the benchmarks); tests use short ones
// (TestTiming) so a fault fits in seconds. Every non-zero Timing must be
// consistent with the rules the parts check (heartbeat_wait <
// capability_lease/2, 2×sync_wait + 500ms ≤ sync_timeout, sync_wait_max <
// gateway_timeout − max_clock_skew) and with the one no part can check
// alone: sync_timeout < gateway_timeout − max_clock_skew (Validate).
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

// TestTiming fits a fault suite on a loaded 2-core machine: sessions of
// 1.5s, gateway_timeout 3s, sync_timeout 2s, sync polls held 0.5s.
func TestTiming() Timing {
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

// Validate checks the rules the parts cannot check alone, and that
// members can heartbeat within their session. The zero Timing is valid.
func (tm Timing) Validate() error {
	if tm == (Timing{}) {
		return nil
	}
	switch {
	case tm.SyncTimeout >= tm.GatewayTimeout-tm.MaxClockSkew:
		return fmt.Errorf("stack: timing: sync_timeout %v must be < gateway_timeout %v − max_clock_skew %v", tm.SyncTimeout, tm.GatewayTimeout, tm.MaxClockSkew)
	case 2*tm.SyncWait >= tm.SyncTimeout:
		// A healthy idle gateway's last good poll was sent up to two held
		// polls ago (the gateway itself insists on 500ms more).
		return fmt.Errorf("stack: timing: 2×sync_wait %v must be < sync_timeout %v", 2*tm.SyncWait, tm.SyncTimeout)
	case tm.SessionTimeout < time.Second:
		return fmt.Errorf("stack: timing: session_timeout %v must be ≥ 1s", tm.SessionTimeout)
	}
	return nil
}

// applyCoordinator puts the timing into a coordinator's configuration.
func (tm Timing) applyCoordinator(cfg *coordinator.Config) {
	if tm == (Timing{}) {
		return
	}
	cfg.CapabilityLease, cfg.Leeway = tm.CapabilityLease, tm.Leeway
	g := &cfg.Groups
	g.HeartbeatWait, g.SessionTimeoutMin = tm.HeartbeatWait, min(time.Second, tm.SessionTimeout)
	g.HandoffTimeout, g.GatewayTimeout, g.MaxClockSkew = tm.HandoffTimeout, tm.GatewayTimeout, tm.MaxClockSkew
	g.SyncWaitMax = tm.SyncWait
}

// applyGateway puts the timing into a gateway's configuration.
func (tm Timing) applyGateway(cfg *gateway.Config) {
	if tm == (Timing{}) {
		return
	}
	cfg.SyncWait, cfg.SyncTimeout = tm.SyncWait, tm.SyncTimeout
}

// applyClient puts the timing into an SDK consumer's configuration: the
// session, a heartbeat wait well inside it, and renewals a quarter of a
// lease before expiry.
func (tm Timing) applyClient(cfg *client.Config) {
	if tm == (Timing{}) {
		return
	}
	cfg.SessionTimeout = tm.SessionTimeout
	cfg.HeartbeatWait = min(tm.HeartbeatWait, cfg.SessionTimeout/2)
	cfg.FetchMaxWait = 500 * time.Millisecond
	cfg.RequestTimeout = 5 * time.Second
	cfg.RevokeTimeout = 2 * time.Second
	cfg.CapabilityExpiryMargin = tm.CapabilityLease / 4
}
