package guard

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/ocap"
)

// Settings are the coordinator's, learned from every sync reset: what
// capabilities must carry (iss, aud), the token checks' leeway and lease
// cap, and how long the coordinator waits for a silent gateway.
type Settings struct {
	Issuer, Audience string
	Leeway, MaxLease time.Duration
	GatewayTimeout   time.Duration
	MaxClockSkew     time.Duration
	// Serve: the coordinator's groups.silent_gateways is "serve": with no
	// coordinator answering, keep serving unexpired capabilities (it
	// never counts this gateway's silence as safety) instead of refusing
	// everything after sync_timeout.
	Serve bool
	// InternalTopics are the coordinator's state topics, granted to no
	// client (the Kafka listener hides and refuses them).
	InternalTopics []string
}

// equal reports whether s and o are the same settings (every field: a
// field added to Settings belongs here too).
func (s Settings) equal(o Settings) bool {
	return s.Issuer == o.Issuer && s.Audience == o.Audience && s.Leeway == o.Leeway && s.MaxLease == o.MaxLease &&
		s.GatewayTimeout == o.GatewayTimeout && s.MaxClockSkew == o.MaxClockSkew && s.Serve == o.Serve &&
		slices.Equal(s.InternalTopics, o.InternalTopics)
}

// ErrNoSettings: a reset without the coordinator's settings (a
// coordinator older than this gateway): nothing can be verified.
var ErrNoSettings = errors.New("sync: the reset carries no coordinator settings")

// settingsOf checks and converts the wire form.
func settingsOf(w *api.CoordinatorSettings) (Settings, error) {
	if w == nil {
		return Settings{}, ErrNoSettings
	}
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	s := Settings{Issuer: w.Issuer, Audience: w.Audience, Leeway: ms(w.LeewayMs), MaxLease: ms(w.MaxLeaseMs),
		GatewayTimeout: ms(w.GatewayTimeoutMs), MaxClockSkew: ms(w.MaxClockSkewMs), Serve: w.SilentGateways == "serve",
		InternalTopics: slices.Clone(w.InternalTopics)}
	switch {
	case w.SilentGateways != "" && w.SilentGateways != "fence" && w.SilentGateways != "serve":
		return Settings{}, fmt.Errorf("sync: coordinator settings: unknown silent_gateways %q", w.SilentGateways)
	case s.Issuer == "" || s.Audience == "":
		return Settings{}, fmt.Errorf("sync: coordinator settings without issuer or audience: %+v", *w)
	case s.Leeway < 0 || s.Leeway > ocap.MaxLeeway || s.MaxLease <= 0 || s.GatewayTimeout <= 0 || s.MaxClockSkew < 0:
		return Settings{}, fmt.Errorf("sync: coordinator settings out of range: %+v", *w)
	}
	return s, nil
}

// fit says why a gateway whose sync_timeout is timeout must not serve
// under these settings, or nil: the coordinator counts a gateway silent
// for gateway_timeout as safe, and clocks may differ by max_clock_skew,
// so the gateway must have fenced itself before then.
func (s Settings) fit(timeout time.Duration) error {
	if s.Serve {
		return nil // the coordinator does not count on this gateway's self-fence
	}
	if limit := s.GatewayTimeout - s.MaxClockSkew; timeout >= limit {
		return fmt.Errorf("gateway.sync_timeout %s is not below the coordinator's groups.gateway_timeout − groups.max_clock_skew (%s − %s = %s): not ready until one of them changes",
			timeout, s.GatewayTimeout, s.MaxClockSkew, limit)
	}
	return nil
}

// VerifierConfig is what a gateway's verifier checks under these settings.
func (s Settings) VerifierConfig() ocap.VerifierConfig {
	return ocap.VerifierConfig{Issuer: s.Issuer, Audience: s.Audience, Leeway: s.Leeway, MaxLease: s.MaxLease}
}
