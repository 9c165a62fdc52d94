package revocation

import (
	"fmt"
	"time"

	"github.com/capgate/capgate/api"
)

// Rule is the expiry rule of every entry: it holds until its time plus
// Leeway plus MaxClockSkew. Leeway is the longest expiry leeway any
// verifier of the tokens uses; MaxClockSkew bounds how far any verifier's
// clock may trail the coordinator's.
type Rule struct {
	Leeway       time.Duration
	MaxClockSkew time.Duration
}

// Validate refuses negative durations.
func (r Rule) Validate() error {
	if r.Leeway < 0 || r.MaxClockSkew < 0 {
		return fmt.Errorf("revocation: rule: leeway and max_clock_skew must be >= 0, got %s and %s", r.Leeway, r.MaxClockSkew)
	}
	return nil
}

// Lapse is the first instant an entry with time t (unix seconds) no
// longer holds.
func (r Rule) Lapse(t int64) time.Time {
	return time.Unix(t, 0).Add(r.Leeway + r.MaxClockSkew)
}

// Holds reports whether an entry with time t still holds at now.
func (r Rule) Holds(t int64, now time.Time) bool {
	return now.Before(r.Lapse(t))
}

// Cover is the rule that covers both r and o: the longer leeway and the
// larger skew.
func (r Rule) Cover(o Rule) Rule {
	return Rule{Leeway: max(r.Leeway, o.Leeway), MaxClockSkew: max(r.MaxClockSkew, o.MaxClockSkew)}
}

// FromSettings is the coordinator's rule, from the settings every sync
// reset carries: its leeway and max_clock_skew.
func FromSettings(s api.CoordinatorSettings) Rule {
	return Rule{Leeway: time.Duration(s.LeewayMs) * time.Millisecond, MaxClockSkew: time.Duration(s.MaxClockSkewMs) * time.Millisecond}
}
