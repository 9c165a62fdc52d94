package driver

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client/session"
)

// flush steps the session with what waits for it, carries out its
// actions (which may queue more), keeps one heartbeat going, and returns
// the commands for the shell.
//
// What waits is stepped together (session.StepMany): the events an
// answer, a user event or a batch of answers queued, then those the
// actions queued (a revoke's cancelled fetches, each a FetchDone). One
// at a time, each walked every held partition: Close of 2,000 took
// 2,000 walks of 2,000.
func (d *Driver) flush() []Command {
	for len(d.pending) > 0 {
		evs := d.pending
		d.pending = nil
		d.act(d.s.StepMany(evs))
	}
	d.heartbeat()
	d.compact()
	out := d.out
	d.out = nil
	return out
}

// act carries out the session's actions in order.
func (d *Driver) act(actions []session.Action) {
	for _, a := range actions {
		switch a := a.(type) {
		case session.Fetch:
			o := d.newOp(&op{kind: KindFetch, fetch: a})
			d.fetches[a.ID] = o
			d.send(o)
		case session.CancelFetch:
			d.cancelFetch(a)
		case session.Commit:
			// Retried for request_timeout (a coordinator blip); a timed
			// commit carries the same offsets again at its next turn.
			d.send(d.newOp(&op{kind: KindCommit, commit: a, deadline: d.now.Add(d.cfg.RequestTimeout)}))
		case session.Leave:
			d.send(d.newOp(&op{kind: KindLeave, token: a.Token, renew: a.Renew, deadline: d.now.Add(d.cfg.RequestTimeout)}))
		case session.Rejoin:
			d.rejoin()
		case session.Stop:
			d.stop()
			d.out = append(d.out, a)
		default: // Deliver, CommitResult, CommitMerged, CallRevoke, CallGrant: the user's
			d.out = append(d.out, a)
		}
	}
}

// compact forgets finished ops.
func (d *Driver) compact() {
	d.ops = slicesDeleteDone(d.ops)
}

func slicesDeleteDone(ops []*op) []*op {
	kept := ops[:0]
	for _, o := range ops {
		if !o.done {
			kept = append(kept, o)
		}
	}
	clear(ops[len(kept):])
	return kept
}

// heartbeat keeps one long-poll heartbeat outstanding while joined.
func (d *Driver) heartbeat() {
	if d.beat != nil || !d.joined || d.stopped || d.s.Status() == session.Stopped {
		return
	}
	d.beat = d.newOp(&op{kind: KindHeartbeat})
	d.send(d.beat)
}

func (d *Driver) beatAnswered(o *op, a Answered) {
	switch {
	case a.Failure == nil:
		if o.resync {
			d.resync = false
		}
		if d.oldTokenNews(o, a.News) {
			d.resync = true
		}
		d.finishBeat(o)
		d.pending = append(d.pending, session.NewsArrived{Now: d.now, Incarnation: o.member, News: a.News})
		return
	case a.Failure.Final:
		d.finishBeat(o)
		d.fail(a.Failure.Err)
		return
	case a.Failure.Code != "":
		d.removed(o, a.Failure)
		d.pending = append(d.pending, session.HeartbeatFailed{Now: d.now, Incarnation: o.member, Code: a.Failure.Code})
	}
	if answerLost(a.Failure) {
		d.resync = true
	}
	d.retry(o, a.Failure) // a rejoin asked for by the session ends it
}

// oldTokenNews: heartbeat o was sent with a member token a carried-over
// renewal (carryOver) has replaced since, and its answer carries
// capabilities. The coordinator minted them to expire with that old
// token, yet counts them a full capability_lease and renews them only
// when half of that is left: a partition granted in it stopped fetching
// at the old token's exp, seconds before any renewal came. The next
// heartbeat then asks for a resync, which renews every capability the
// member holds under the new token.
func (d *Driver) oldTokenNews(o *op, n api.HeartbeatResponse) bool {
	member := d.s.Member()
	return o.member == member.Incarnation && o.token != member.Token && len(n.Grants)+len(n.Renew) > 0
}

// removed reports MemberRemoved when heartbeat o's refusal f removes
// the current member while it is active (not leaving or closing: then
// unknown_member is the answer to its own leave).
func (d *Driver) removed(o *op, f *Failure) {
	if o.member == d.s.Member().Incarnation {
		d.removedBy(f, o.last != nil)
	}
}

// commitRemoved reports MemberRemoved when commit o's refusal f removes
// the current member (its token is the member's): a commit answered
// before the heartbeat makes the session lose the member and rejoin too,
// and the heartbeat's own unknown_member then finds it rejoining — the
// removal went unreported (consume's warning missing under load). Unheard
// when the heartbeat in flight had failed without an answer.
func (d *Driver) commitRemoved(o *op, f *Failure) {
	if f != nil && o.commit.Token == d.s.Member().Token {
		d.removedBy(f, d.beat != nil && d.beat.last != nil)
	}
}

// removedBy reports MemberRemoved for refusal f of a request of the
// current member, once: the session leaves Active as it steps the
// refusal.
func (d *Driver) removedBy(f *Failure, unheard bool) {
	if !api.NeedsRejoin(f.Code) || d.s.Status() != session.Active {
		return
	}
	unheard = unheard && f.Removed == "" // said why: not an expiry
	d.out = append(d.out, MemberRemoved{Member: d.s.Member().ID, Unheard: unheard, Removed: f.Removed, Err: f.Err})
}

// answerLost: the coordinator may have decided the heartbeat, its news
// then counted as delivered, yet the member never read the answer — no
// answer at all (a timeout, a reset, a body that did not decode) or a
// 5xx. A 4xx was refused before the machine saw it, and a 421 comes from
// a deposed replica whose successor renews everything at the member's
// first heartbeat.
func answerLost(f *Failure) bool { return f.Code == "" || f.Status >= 500 }

func (d *Driver) finishBeat(o *op) {
	d.finish(o)
	if d.beat == o {
		d.beat = nil
	}
}

// renewTime is when a member whose token is memberToken, joined at now,
// is renewed: margin before the token's exp, at most half its life
// left; zero with no margin or an exp it cannot read. The token is the
// coordinator's answer, read without verifying it: only its timing is
// used.
func renewTime(now time.Time, memberToken string, margin time.Duration) time.Time {
	exp, ok := TokenExpiry(memberToken)
	if margin <= 0 || !ok {
		return time.Time{}
	}
	return exp.Add(-min(margin, exp.Sub(now)/2))
}

// TokenExpiry reads a JWT's exp claim without verifying it (for timing
// only: the coordinator and gateways verify tokens).
func TokenExpiry(token string) (time.Time, bool) {
	var claims struct {
		Exp int64 `json:"exp"`
	}
	if !unverifiedClaims(token, &claims) || claims.Exp <= 0 {
		return time.Time{}, false
	}
	return time.Unix(claims.Exp, 0), true
}

// TokenID reads a JWT's jti without verifying it (to name a credential
// in a log line), "" when it has none or one longer than 64 bytes.
func TokenID(token string) string {
	var claims struct {
		JTI string `json:"jti"`
	}
	if !unverifiedClaims(token, &claims) || len(claims.JTI) > 64 {
		return ""
	}
	return claims.JTI
}

// unverifiedClaims decodes a JWT's payload into claims, unverified.
func unverifiedClaims(token string, claims any) bool {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	return err == nil && json.Unmarshal(payload, claims) == nil
}

// rejoin: the member is gone; join again (without end) and restart the
// heartbeats once joined.
func (d *Driver) rejoin() {
	d.joined, d.renewAt = false, time.Time{}
	if d.beat != nil {
		d.finishBeat(d.beat)
	}
	if d.join == nil {
		d.join = d.newOp(&op{kind: KindJoin, key: d.joinKey()})
		d.send(d.join)
	}
}

func (d *Driver) joinAnswered(o *op, a Answered) {
	f := a.Failure
	switch {
	case o.carry != nil && f != nil && f.retriable() && d.carrying(o):
		d.retry(o, f) // within its request_timeout; then the member renews anew
	case o.carry != nil: // refused, or answered: carried over or renewed anew
		d.carryAnswered(o, f, a.Join)
	case f == nil:
		d.finish(o)
		d.join, d.joined = nil, true
		d.renewAt = renewTime(d.now, a.Join.MemberToken, d.cfg.MemberRenew)
		d.answeredSession(a.Join)
		if o.initial {
			d.out = append(d.out, JoinResult{Response: a.Join})
		}
		d.pending = append(d.pending, session.Joined{Now: d.now, Response: a.Join})
	case !f.retriable():
		d.finish(o)
		d.ended(o, f)
	default:
		if o.initial && o.round == 0 {
			d.out = append(d.out, JoinRetrying{Err: f.Err, Until: o.deadline})
		}
		d.retry(o, f)
	}
}

func (d *Driver) fetchAnswered(o *op, a Answered) {
	f := a.Failure
	if o.cancelled {
		o.done = true
		if d.cfg.Bugs.DeliverAfterRevoke && f == nil && a.Fetched.Records > 0 {
			d.out = append(d.out, session.Deliver{Batches: []session.Batch{{
				Partition: o.fetch.Partition, Epoch: o.fetch.Epoch, Offset: o.fetch.Offset,
				Next: a.Fetched.Next, Records: a.Fetched.Records, Bytes: a.Fetched.Bytes, Payload: a.Fetched.Payload,
			}}})
		}
		return
	}
	done := session.FetchDone{Now: d.now, ID: o.fetch.ID, Partition: o.fetch.Partition, Earliest: -1, Latest: -1}
	switch {
	case f == nil:
		done.Records, done.Bytes, done.Next, done.Payload = a.Fetched.Records, a.Fetched.Bytes, a.Fetched.Next, a.Fetched.Payload
	case f.retriable():
		d.fetchFailed(o, f)
		return
	default:
		done.Code, done.Earliest, done.Latest = f.Code, f.Earliest, f.Latest
		if done.Code == "" {
			done.Code = api.CodeUnavailable
		}
	}
	o.done = true
	delete(d.fetches, o.fetch.ID)
	d.pending = append(d.pending, done)
	if f != nil && f.fatal() {
		d.abort(f.Err)
	}
}

// abort reports err to the user and closes the session: it releases what
// it holds and leaves, instead of holding partitions nobody can read.
func (d *Driver) abort(err error) {
	if d.aborted {
		return
	}
	d.aborted = true
	d.out = append(d.out, Aborted{Err: err})
	d.pending = append(d.pending, session.CloseRequested{Now: d.now})
}

// fetchFailed moves every fetch off a gateway that is unreachable or
// failing, tries the next one at once, and pauses (backoff) once every
// gateway failed in a row, or when the failure is not the gateway's.
func (d *Driver) fetchFailed(o *op, f *Failure) {
	n := max(d.cfg.Gateways, 1)
	failover := f.failover()
	if failover && d.gateway == o.gateway {
		d.gateway = (o.gateway + 1) % n
	}
	o.attempts++
	if failover && o.attempts%n != 0 {
		if d.fetchExpiring(o, d.now) {
			d.fetchGivenUp(o, f)
			return
		}
		d.send(o)
		return
	}
	d.retry(o, f)
	if d.fetchExpiring(o, o.retryAt) {
		d.fetchGivenUp(o, f)
	}
}

// fetchExpiring: fetch o's capability expires within the session's
// ExpiryMargin of at — a retry then would present a capability the
// gateway refuses (token_expired). Retried without end, every
// partition's fetch went on through a gateway's long out_of_sync and
// reached it expired: each a failed verification charged to the
// address and the member (gateway auth_failures_per_second), whose
// budget, spent, had the gateway refuse the member's renewed
// capabilities 429 rate_limited for ~14 s (lost2's run3, orders/784).
func (d *Driver) fetchExpiring(o *op, at time.Time) bool {
	exp := o.fetch.ExpiresAt
	return !exp.IsZero() && !at.Before(exp.Add(-d.cfg.Session.ExpiryMargin))
}

// fetchGivenUp ends fetch o with its retriable failure f: the session
// waits for the partition's renewal (its capability is expiring) and
// fetches again with the renewed one.
func (d *Driver) fetchGivenUp(o *op, f *Failure) {
	o.done, o.retryAt = true, time.Time{}
	delete(d.fetches, o.fetch.ID)
	d.pending = append(d.pending, session.FetchDone{Now: d.now, ID: o.fetch.ID, Partition: o.fetch.Partition,
		Code: f.code(), Earliest: -1, Latest: -1})
}

// cancelFetch aborts a fetch; the session gets its FetchDone (Canceled)
// at once, and a late answer is dropped.
func (d *Driver) cancelFetch(c session.CancelFetch) {
	o := d.fetches[c.ID]
	if o == nil {
		return
	}
	delete(d.fetches, c.ID)
	o.cancelled, o.retryAt = true, time.Time{}
	if o.call != 0 {
		d.out = append(d.out, Cancel{Call: o.call}) // its answer is dropped when it comes
	} else {
		o.done = true
	}
	d.pending = append(d.pending, session.FetchDone{Now: d.now, ID: c.ID, Partition: c.Partition, Canceled: true, Earliest: -1, Latest: -1})
}

// retryAnswered handles a commit's or leave's answer: done on success or
// a final refusal, else retried until its request_timeout.
// retryAnswered steps the answer of a commit's or leave's attempt. A
// commit hedged with replicas (hedge) has earlier attempts in flight
// besides the latest: the first success decides; a refusal waits for
// the attempts still in flight (one may have landed it: a release
// refused because another attempt of it already released); a retriable
// failure of the latest is retried as ever, of an earlier one dropped.
func (d *Driver) retryAnswered(o *op, a Answered, latest bool) {
	f := a.Failure
	if f == nil {
		d.finish(o)
		d.ended(o, nil)
		return
	}
	if latest {
		o.hedgeAt = time.Time{}
	}
	if !f.retriable() && o.refused == nil {
		o.refused = f
	}
	switch {
	case o.refused != nil && o.inFlight(): // its answer decides
	case o.refused != nil:
		d.finish(o)
		d.ended(o, o.refused)
	case latest:
		d.retry(o, f)
	}
}

// stop ends everything: the session is over.
func (d *Driver) stop() {
	d.stopped = true
	for _, o := range d.ops {
		if !o.done {
			d.finish(o)
		}
	}
	d.join, d.beat = nil, nil
	clear(d.fetches)
}

// fail stops the consumer for good with err.
func (d *Driver) fail(err error) {
	d.stop()
	d.out = append(d.out, Failed{Err: err})
}
