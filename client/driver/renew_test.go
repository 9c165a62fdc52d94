package driver_test

import (
	"encoding/base64"
	"fmt"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client/driver"
	"github.com/capgate/capgate/client/session"
)

// memberToken is a JWT-shaped member token expiring at exp (unsigned: the
// driver reads only its exp, for timing).
func memberToken(exp time.Time) string {
	part := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	return part(`{"alg":"EdDSA","typ":"capgate-member+jwt"}`) + "." + part(fmt.Sprintf(`{"sub":"m1","exp":%d}`, exp.Unix())) + ".sig"
}

// The member token never outlives the credential, so the driver renews
// the member MemberRenew before the token's exp (at most half its life
// left): first a rejoin by its member id (carried over); when the
// coordinator refuses that (another credential: unknown_member), a
// RenewRequested revokes every partition; the renewal's leave reports no
// LeaveResult (the consumer goes on) and is followed by a join. Before,
// nothing renewed the member: its heartbeats met token_expired for ever.
func TestDriverRenewsTheMemberBeforeItsTokenExpires(t *testing.T) {
	for _, tc := range []struct {
		name     string
		life     time.Duration
		renewDue time.Duration
	}{
		{"long token: margin before exp", time.Hour, time.Hour - 25*time.Second},
		{"short token: half its life", 4 * time.Second, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config()
			cfg.MemberRenew = 25 * time.Second
			d := driver.New(cfg)
			join := only(t, d.Start(t0), driver.KindJoin)
			resp := api.JoinResponse{MemberID: "m1", MemberToken: memberToken(t0.Add(tc.life)), SessionTimeoutMs: 10000, HeartbeatWaitMs: 3000,
				Grants: []api.Grant{{Topic: "t", Partition: 0, Epoch: 1, Capability: "cap", ExpiresAt: t0.Add(time.Minute).UTC().Format(time.RFC3339)}}}
			cmds := d.Answer(driver.Answered{Now: t0, Call: join.Call, Join: resp})
			fetch := ofKind(t, cmds, driver.KindFetch)
			if got := d.NextDeadline(); !got.Equal(t0.Add(tc.renewDue)) {
				t.Fatalf("next deadline %v after the join, want the renewal at %v", got.Sub(t0), tc.renewDue)
			}
			if _, ok := find[session.CallRevoke](d.Tick(t0.Add(tc.renewDue - time.Millisecond))); ok {
				t.Fatal("renewed before its time")
			}
			now := t0.Add(tc.renewDue)
			carry := ofKind(t, d.Tick(now), driver.KindJoin)
			if carry.Join.MemberID != "m1" {
				t.Fatalf("the renewal's first join %+v, want a rejoin of m1", carry.Join)
			}
			hook, ok := find[session.CallRevoke](d.Answer(driver.Answered{Now: now, Call: carry.Call,
				Failure: &driver.Failure{Code: api.CodeUnknownMember, Status: 409}}))
			if !ok || hook.Lost {
				t.Fatalf("no revoke at the renewal's time (%+v %t)", hook, ok)
			}
			d.Answer(driver.Answered{Now: now, Call: fetch.Call, Fetched: driver.Fetched{Next: 0}})
			commit := ofKind(t, d.User(session.HookDone{Now: now, ID: hook.ID}), driver.KindCommit)
			if !commit.Commit.Release {
				t.Fatalf("renewal commit %+v, want a release", commit.Commit)
			}
			leave := ofKind(t, d.Answer(driver.Answered{Now: now, Call: commit.Call}), driver.KindLeave)
			cmds = d.Answer(driver.Answered{Now: now, Call: leave.Call})
			if r, ok := find[driver.LeaveResult](cmds); ok {
				t.Fatalf("the renewal's leave reported %+v to the consumer", r)
			}
			ofKind(t, cmds, driver.KindJoin)
		})
	}
}

// renewable starts a driver renewing 25 s before its member token's exp,
// joins member m1 (token life 1 h, one partition granted) and returns it
// with the pending fetch and the renewal's time.
func renewable(t *testing.T) (*driver.Driver, driver.Send, time.Time) {
	t.Helper()
	cfg := config()
	cfg.MemberRenew = 25 * time.Second
	d := driver.New(cfg)
	join := only(t, d.Start(t0), driver.KindJoin)
	resp := api.JoinResponse{MemberID: "m1", MemberToken: memberToken(t0.Add(time.Hour)), SessionTimeoutMs: 10000, HeartbeatWaitMs: 3000,
		Grants: []api.Grant{{Topic: "t", Partition: 0, Epoch: 1, Capability: "cap", ExpiresAt: t0.Add(2 * time.Hour).UTC().Format(time.RFC3339)}}}
	fetch := ofKind(t, d.Answer(driver.Answered{Now: t0, Call: join.Call, Join: resp}), driver.KindFetch)
	return d, fetch, t0.Add(time.Hour - 25*time.Second)
}

// A renewal the coordinator carries over (the same credential or a
// refreshed token of the same identity: its rejoin by member id answered)
// keeps the member: no partition is revoked, no leave, no new join; the
// member's token is the new one (the next heartbeat presents it) and the
// next renewal is due before the new token's exp. Before, every renewal
// revoked and released every partition, left and joined as a new member,
// so the group reassigned around it twice per member token.
func TestDriverCarriesTheMemberOverAtItsRenewal(t *testing.T) {
	d, _, due := renewable(t)
	cmds := d.Tick(due)
	carry := ofKind(t, cmds, driver.KindJoin)
	if carry.Join.MemberID != "m1" || carry.Join.RenewToken != memberToken(t0.Add(time.Hour)) || len(carry.Join.Topics) == 0 || carry.Token != "" {
		t.Fatalf("renewal's rejoin %+v (token %q), want member m1, the subscription and the shell's credential", carry.Join, carry.Token)
	}
	if _, ok := find[session.CallRevoke](cmds); ok {
		t.Fatal("revoked at the renewal before the coordinator answered its rejoin")
	}
	newToken := memberToken(due.Add(time.Hour))
	cmds = d.Answer(driver.Answered{Now: due, Call: carry.Call, Join: api.JoinResponse{MemberID: "m1", MemberToken: newToken, SessionTimeoutMs: 10000, HeartbeatWaitMs: 3000}})
	for _, c := range cmds {
		switch c := c.(type) {
		case session.CallRevoke, driver.JoinResult, driver.LeaveResult:
			t.Fatalf("carried-over renewal gave %T %+v", c, c)
		case driver.Send:
			if c.Kind == driver.KindLeave || c.Kind == driver.KindJoin {
				t.Fatalf("carried-over renewal sent a %v", c.Kind)
			}
		}
	}
	if got := d.Session().Member().Token; got != newToken {
		t.Fatalf("member token after the carry-over %q, want the rejoin's", got)
	}
	if got, want := d.NextDeadline(), due.Add(time.Hour-25*time.Second); got.After(want) || got.Before(due.Add(time.Second)) {
		t.Fatalf("next deadline %v after the carry-over, want the next renewal at %v", got.Sub(t0), want.Sub(t0))
	}
	if got := d.Session().Assigned(); len(got) != 1 {
		t.Fatalf("assigned %v after the carry-over, want the partition kept", got)
	}
}

// Each way a carry-over cannot renew the member renews it anew instead
// (every partition revoked, then a leave and a join): a refusal, no
// answer within request_timeout, an answer for another member, and a
// token that would not outlive the old one (the same credential near
// its own exp: carrying over again and again would fence the partitions
// at ever shorter intervals).
func TestDriverRenewsAnewWhenTheCarryOverCannot(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func(d *driver.Driver, carry driver.Send, now time.Time) []driver.Command
	}{
		{"refused", func(d *driver.Driver, carry driver.Send, now time.Time) []driver.Command {
			return d.Answer(driver.Answered{Now: now, Call: carry.Call, Failure: &driver.Failure{Code: api.CodeUnknownMember, Status: 409}})
		}},
		{"unavailable until request_timeout", func(d *driver.Driver, carry driver.Send, now time.Time) []driver.Command {
			d.Answer(driver.Answered{Now: now, Call: carry.Call, Failure: &driver.Failure{Code: api.CodeUnavailable, Status: 503}})
			return d.Tick(now.Add(carry.Timeout))
		}},
		{"no answer", func(d *driver.Driver, carry driver.Send, now time.Time) []driver.Command {
			return d.Tick(now.Add(carry.Timeout))
		}},
		{"another member", func(d *driver.Driver, carry driver.Send, now time.Time) []driver.Command {
			return d.Answer(driver.Answered{Now: now, Call: carry.Call, Join: api.JoinResponse{MemberID: "m2", MemberToken: memberToken(now.Add(time.Hour))}})
		}},
		{"no longer", func(d *driver.Driver, carry driver.Send, now time.Time) []driver.Command {
			return d.Answer(driver.Answered{Now: now, Call: carry.Call, Join: api.JoinResponse{MemberID: "m1", MemberToken: memberToken(t0.Add(time.Hour))}})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, _, due := renewable(t)
			carry := ofKind(t, d.Tick(due), driver.KindJoin)
			hook, ok := find[session.CallRevoke](tc.answer(d, carry, due))
			if !ok || hook.Lost || len(hook.Partitions) != 1 {
				t.Fatalf("no revoke of the partition after the carry-over failed (%+v %t)", hook, ok)
			}
		})
	}
}

// A heartbeat held with the old member token across a carried-over
// renewal is answered with capabilities minted to expire with that old
// token (no capability outlives the member token it was asked with),
// which the coordinator counts a full capability_lease and renews only
// when half of that is left: a partition granted in it stopped fetching
// at the old token's exp, ~5–10 s before any renewal came
// (coordinator's TestRenewalLeavesOldTokenGrantsShort). So after such an
// answer the next heartbeat, with the new token, asks for a resync: every
// capability the member holds is renewed under the new token.
func TestDriverResyncsAfterOldTokenNews(t *testing.T) {
	cfg := config()
	cfg.MemberRenew = 25 * time.Second
	d := driver.New(cfg)
	join := only(t, d.Start(t0), driver.KindJoin)
	oldToken := memberToken(t0.Add(time.Hour))
	resp := api.JoinResponse{MemberID: "m1", MemberToken: oldToken, SessionTimeoutMs: 10000, HeartbeatWaitMs: 3000,
		Grants: []api.Grant{{Topic: "t", Partition: 0, Epoch: 1, Capability: "cap", ExpiresAt: t0.Add(2 * time.Hour).UTC().Format(time.RFC3339)}}}
	beat := ofKind(t, d.Answer(driver.Answered{Now: t0, Call: join.Call, Join: resp}), driver.KindHeartbeat)
	if beat.Token != oldToken {
		t.Fatalf("heartbeat with %q, want the member token", beat.Token)
	}
	due := t0.Add(time.Hour - 25*time.Second)
	carry := ofKind(t, d.Tick(due), driver.KindJoin)
	newToken := memberToken(due.Add(time.Hour))
	d.Answer(driver.Answered{Now: due, Call: carry.Call, Join: api.JoinResponse{MemberID: "m1", MemberToken: newToken, SessionTimeoutMs: 10000, HeartbeatWaitMs: 3000}})

	exp := t0.Add(time.Hour).UTC().Format(time.RFC3339) // the old token's: the coordinator's cap
	next := ofKind(t, d.Answer(driver.Answered{Now: due.Add(time.Second), Call: beat.Call, News: api.HeartbeatResponse{
		Grants: []api.Grant{{Topic: "t", Partition: 1, Epoch: 1, Capability: "cap1", ExpiresAt: exp}}}}), driver.KindHeartbeat)
	if next.Token != newToken || !next.Resync {
		t.Fatalf("heartbeat after the old token's news: resync %t, token new %t; want a resync with the new token", next.Resync, next.Token == newToken)
	}

	// An empty answer to the old token needs nothing.
	again := ofKind(t, d.Answer(driver.Answered{Now: due.Add(2 * time.Second), Call: next.Call}), driver.KindHeartbeat)
	if again.Resync {
		t.Fatal("resync asked again after the resync was answered")
	}
}

// A carry-over that fails retriably — no answer from this replica, a
// 503 or 429, the credential source failing once (the OAuth token
// endpoint down a moment) — is tried again within its request_timeout:
// the member is still renewed in place. Before, any failure renewed the
// member anew at once: every partition released, a leave and a join
// (which then met the same outage), the group reassigned around it.
func TestDriverRetriesTheCarryOver(t *testing.T) {
	d, _, due := renewable(t)
	carry := ofKind(t, d.Tick(due), driver.KindJoin)
	cmds := d.Answer(driver.Answered{Now: due, Call: carry.Call, Failure: &driver.Failure{Err: fmt.Errorf("client: credential source: token endpoint unavailable")}})
	if hook, ok := find[session.CallRevoke](cmds); ok {
		t.Fatalf("the carry-over's first failure revoked %+v: renewed anew at once", hook.Partitions)
	}
	var again driver.Send
	for now := due; again.Call == 0 && now.Before(due.Add(carry.Timeout)); now = now.Add(100 * time.Millisecond) {
		for _, s := range sends(d.Tick(now)) {
			if s.Kind == driver.KindJoin {
				again = s
			}
		}
	}
	if again.Call == 0 || again.Join.MemberID != "m1" || again.Join.RenewToken != carry.Join.RenewToken {
		t.Fatalf("carry-over not tried again: %+v", again)
	}
	newToken := memberToken(due.Add(time.Hour))
	cmds = d.Answer(driver.Answered{Now: due.Add(time.Second), Call: again.Call, Join: api.JoinResponse{MemberID: "m1", MemberToken: newToken, SessionTimeoutMs: 10000, HeartbeatWaitMs: 3000}})
	if hook, ok := find[session.CallRevoke](cmds); ok {
		t.Fatalf("revoked %+v after the carry-over succeeded", hook.Partitions)
	}
	if got := d.Session().Member().Token; got != newToken {
		t.Fatal("member token not renewed by the retried carry-over")
	}
}

// A carry-over refused 429 rate_limited — its tenant's
// tenant_member_rate spent: a renewal costs a token and one per
// partition its member owns (f3e4a2e) — is tried again after the
// answer's Retry-After, not before, and still renews the member in place.
func TestDriverCarryOverWaitsOutARateLimit(t *testing.T) {
	d, _, due := renewable(t)
	carry := ofKind(t, d.Tick(due), driver.KindJoin)
	const retryAfter = 3 * time.Second
	cmds := d.Answer(driver.Answered{Now: due, Call: carry.Call, Failure: &driver.Failure{
		Code: api.CodeRateLimited, Status: 429, RetryAfter: retryAfter, Err: fmt.Errorf("429 rate_limited")}})
	if hook, ok := find[session.CallRevoke](cmds); ok {
		t.Fatalf("a 429 on the carry-over revoked %+v: renewed anew at once", hook.Partitions)
	}
	var again driver.Send
	var at time.Time
	for now := due; again.Call == 0 && now.Before(due.Add(carry.Timeout)); now = now.Add(100 * time.Millisecond) {
		for _, s := range sends(d.Tick(now)) {
			if s.Kind == driver.KindJoin {
				again, at = s, now
			}
		}
	}
	if again.Call == 0 || again.Join.RenewToken != carry.Join.RenewToken {
		t.Fatalf("carry-over not tried again after a 429: %+v", again)
	}
	if at.Before(due.Add(retryAfter)) {
		t.Fatalf("carry-over tried again %v after a 429 saying Retry-After %v", at.Sub(due), retryAfter)
	}
	newToken := memberToken(due.Add(time.Hour))
	cmds = d.Answer(driver.Answered{Now: at, Call: again.Call, Join: api.JoinResponse{MemberID: "m1", MemberToken: newToken, SessionTimeoutMs: 10000, HeartbeatWaitMs: 3000}})
	if hook, ok := find[session.CallRevoke](cmds); ok {
		t.Fatalf("revoked %+v after the retried carry-over succeeded", hook.Partitions)
	}
	if got := d.Session().Member().Token; got != newToken {
		t.Fatal("member token not renewed by the carry-over retried after its 429")
	}
}
