// Package revocationtest is the table every holder of the revocation view
// must answer alike: a token denied until D, checked at some instant by a
// verifier with some leeway, under the coordinator's max_clock_skew. The
// coordinator shell (over HTTP), the gateway (verifier + authz.Decide)
// and the simulation each run it through their own code and must give the
// answer written here — so they answer the same.
//
// The table includes the reproduced gap of issue #12: a deny-list whose
// entries lapsed at exp stopped denying a client credential at exp+1s
// while a verifier with 2 s leeway still accepted it.
package revocationtest

import "time"

// Answer is what a holder of the view says about the token.
type Answer string

// The answers.
const (
	Allowed Answer = "allowed"            // accepted: expiry and view pass
	Expired Answer = "token_expired"      // refused: now >= exp + leeway
	Revoked Answer = "capability_revoked" // refused by the view: denied
)

// Case is one row. Times are relative to the deny's expiry D (unix
// seconds, chosen by the runner): the token expires at D + TokenAfter
// (whole seconds), the check runs at D + At.
type Case struct {
	Name         string
	TokenAfter   time.Duration
	Leeway       time.Duration
	MaxClockSkew time.Duration
	At           time.Duration
	Want         Answer
}

// Cases is the table. Written out by hand, not computed from the rule.
func Cases() []Case {
	s := time.Second
	ms := time.Millisecond
	return []Case{
		// The token's own exp is the deny's: refused all along, first as
		// revoked, then as expired once exp + leeway passed.
		{"leeway 0: before exp", 0, 0, s, -s, Revoked},
		{"leeway 0: at exp", 0, 0, s, 0, Expired},
		{"leeway 0: after exp", 0, 0, s, s, Expired},
		{"leeway 1s: at exp", 0, s, s, 0, Revoked},
		{"leeway 1s: exp+1s", 0, s, s, s, Expired},
		{"leeway 2s: at exp", 0, 2 * s, s, 0, Revoked},
		{"leeway 2s: exp+1s, the reproduced gap", 0, 2 * s, s, s, Revoked},
		{"leeway 2s: exp+1.9s", 0, 2 * s, s, 1900 * ms, Revoked},
		{"leeway 2s: exp+2s", 0, 2 * s, s, 2 * s, Expired},
		{"leeway 2s: exp+3s", 0, 2 * s, s, 3 * s, Expired},
		{"leeway 2s, no skew: exp+1s", 0, 2 * s, 0, s, Revoked},
		// The admin denied for less than the token lives: the deny holds
		// until D + leeway + max_clock_skew, then the token passes again.
		{"short deny, leeway 0: at D", 10 * s, 0, s, 0, Revoked},
		{"short deny, leeway 0: D+0.999s", 10 * s, 0, s, 999 * ms, Revoked},
		{"short deny, leeway 0: D+1s", 10 * s, 0, s, s, Allowed},
		{"short deny, leeway 2s: D+2s", 10 * s, 2 * s, s, 2 * s, Revoked},
		{"short deny, leeway 2s: D+2.999s", 10 * s, 2 * s, s, 2999 * ms, Revoked},
		{"short deny, leeway 2s: D+3s", 10 * s, 2 * s, s, 3 * s, Allowed},
		{"short deny, leeway 2s, skew 0.5s: D+2.4s", 10 * s, 2 * s, 500 * ms, 2400 * ms, Revoked},
		{"short deny, leeway 2s, skew 0.5s: D+2.5s", 10 * s, 2 * s, 500 * ms, 2500 * ms, Allowed},
		{"short deny, leeway 1s, no skew: D+0.9s", 10 * s, s, 0, 900 * ms, Revoked},
		{"short deny, leeway 1s, no skew: D+1s", 10 * s, s, 0, s, Allowed},
	}
}
