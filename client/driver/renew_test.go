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
// left): a RenewRequested at that deadline revokes every partition; the
// renewal's leave reports no LeaveResult (the consumer goes on) and is
// followed by a join. Before, nothing renewed the member: its heartbeats
// met token_expired for ever.
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
			hook, ok := find[session.CallRevoke](d.Tick(now))
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
