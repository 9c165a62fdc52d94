package coordinators

import (
	"fmt"
	"net/http"
	"time"
)

// Outcome is how one call over the list ended, as far as sending it
// again is concerned.
type Outcome uint8

const (
	// Answered: an answer to act on (a success, or a refusal that is
	// the request's own). Never retried here.
	Answered Outcome = iota
	// NoLeader: every replica the call reached answered 421 not_leader
	// and none named a leader it could follow (an election is under
	// way). A replica answers 421 before it reads what the request asks
	// (coordinator.Replica.serve), so the request provably did not land.
	NoLeader
	// Unsent: no replica could be connected to (refused, not resolved):
	// no byte of the request left the process.
	Unsent
	// Unavailable: a 5xx, or the connection broke after the request was
	// sent: it may have landed.
	Unavailable
)

// Idempotent reports whether sending a request of method twice does
// what sending it once does (RFC 9110 §9.2.2). The admin API keeps to
// it: its PUTs set a value, DELETE removes; every POST acts anew (a
// second revoke bumps the epoch again, a second rotate rotates again,
// a second client credential is another credential with its own jti).
func Idempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// Retry bounds the retries of one request across whole walks of the
// list (a Call each), the way rpk retries a request across brokers while
// a controller moves: a request that provably did not land (NoLeader,
// Unsent) is sent again whatever its method; one that may have landed
// (Unavailable) only when its method is idempotent. Retries stop once
// Budget has passed since the first send. Pure: the caller passes the
// clock's reading and sleeps the wait itself.
type Retry struct {
	// Budget is how long a request is retried, from its first send.
	Budget time.Duration
	// Base and Max bound the pause: Base doubled per retry, at most Max.
	Base, Max time.Duration

	start    time.Time
	attempts int
	last     Outcome
}

// DefaultRetry is the CLI's: 15 s covers a takeover (DESIGN §12: ≤ 3 s)
// several times over, so an operator's command outlives an election but
// not an outage.
func DefaultRetry() Retry {
	return Retry{Budget: 15 * time.Second, Base: 100 * time.Millisecond, Max: time.Second}
}

// Next records that one attempt of a method request ended in outcome at
// now (the first call starts the budget) and says whether to send it
// again after wait.
func (r *Retry) Next(now time.Time, method string, outcome Outcome) (wait time.Duration, again bool) {
	if r.attempts == 0 {
		r.start = now
	}
	r.attempts++
	r.last = outcome
	switch outcome {
	case NoLeader, Unsent:
	case Unavailable:
		if !Idempotent(method) {
			return 0, false
		}
	default:
		return 0, false
	}
	wait = r.Base << min(r.attempts-1, 16)
	if wait > r.Max || wait <= 0 {
		wait = r.Max
	}
	if now.Add(wait).Sub(r.start) > r.Budget {
		return 0, false
	}
	return wait, true
}

// Attempts is how many attempts Next was told of.
func (r *Retry) Attempts() int { return r.attempts }

// GaveUp says what happened when the last attempt's outcome was not an
// answer: how many attempts over how long, and what it means for the
// request (did it land?). "" when the last outcome was Answered.
func (r *Retry) GaveUp(now time.Time, method string) string {
	took := now.Sub(r.start).Round(10 * time.Millisecond)
	switch r.last {
	case NoLeader:
		return fmt.Sprintf("no coordinator replica led after %d attempts over %s (each answered not_leader naming no leader it could follow: an election under way, or no replica able to lead); the request was not carried out: retry it once a replica leads (GET /readyz on each replica says its role and the leader it knows)", r.attempts, took)
	case Unsent:
		return fmt.Sprintf("no coordinator replica could be reached after %d attempts over %s; the request was not sent", r.attempts, took)
	case Unavailable:
		if !Idempotent(method) {
			return fmt.Sprintf("not retried: a %s may have been carried out before the answer was lost (check before sending it again, e.g. capgate admin audit)", method)
		}
		return fmt.Sprintf("the coordinator failed to answer after %d attempts over %s", r.attempts, took)
	}
	return ""
}
