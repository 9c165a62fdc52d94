package revocation

import (
	"fmt"
	"time"

	"github.com/capgate/capgate/api"
)

// Rule is the expiry rule of every entry: it holds until its time plus
// Leeway plus MaxClockSkew. Leeway is the longest expiry leeway any
// verifier of the tokens uses; MaxClockSkew bounds how far any verifier's
// clock may trail the coordinator's. Retain keeps a lapsed entry that
// much longer before Prune drops it (Kept), without changing what it
// answers at any instant: the coordinator takes a renewal's member token
// up to groups.renew_token_grace past its expiry, and checks it as at
// the instant the grace reaches back to (now − grace), which needs every
// entry that held then (coordinator/join.go renewTokenInGrace). Gateways
// never see member tokens: their rule retains nothing.
type Rule struct {
	Leeway       time.Duration
	MaxClockSkew time.Duration
	Retain       time.Duration
}

// Validate refuses negative durations.
func (r Rule) Validate() error {
	if r.Leeway < 0 || r.MaxClockSkew < 0 || r.Retain < 0 {
		return fmt.Errorf("revocation: rule: leeway, max_clock_skew and retain must be >= 0, got %s, %s and %s", r.Leeway, r.MaxClockSkew, r.Retain)
	}
	return nil
}

// Lapse is the first instant an entry with time t (unix seconds) no
// longer holds.
func (r Rule) Lapse(t int64) time.Time {
	return time.Unix(t, 0).Add(r.Leeway + r.MaxClockSkew)
}

// Kept is the first instant an entry with time t may be dropped: its
// Lapse plus Retain.
func (r Rule) Kept(t int64) time.Time {
	return r.Lapse(t).Add(r.Retain)
}

// Holds reports whether an entry with time t still holds at now.
func (r Rule) Holds(t int64, now time.Time) bool {
	return now.Before(r.Lapse(t))
}

// Cover is the rule that covers both r and o: the longer leeway, the
// larger skew and the longer retention.
func (r Rule) Cover(o Rule) Rule {
	return Rule{Leeway: max(r.Leeway, o.Leeway), MaxClockSkew: max(r.MaxClockSkew, o.MaxClockSkew), Retain: max(r.Retain, o.Retain)}
}

// FromSettings is the coordinator's rule, from the settings every sync
// reset carries: its leeway and max_clock_skew.
func FromSettings(s api.CoordinatorSettings) Rule {
	return Rule{Leeway: time.Duration(s.LeewayMs) * time.Millisecond, MaxClockSkew: time.Duration(s.MaxClockSkewMs) * time.Millisecond}
}
