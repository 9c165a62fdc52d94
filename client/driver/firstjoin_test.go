package driver_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client/driver"
)

// failoverConfig is a consumer of three replicas whose first join may
// take 30 s, each attempt 5 s.
func failoverConfig() driver.Config {
	cfg := config()
	cfg.Replicas, cfg.RequestTimeout, cfg.JoinTimeout = true, 5*time.Second, 30*time.Second
	return cfg
}

// TestFirstJoinOutlastsAFailover: a failover cuts the first join off for
// longer than request_timeout — the leader's attempt never answered,
// standbys answering 421 with no leader known, a replica not running,
// 503 — and the join is retried after backoffs, each attempt within
// request_timeout and carrying the first attempt's key (so an attempt
// the failing leader wrote is answered with the member it made, never a
// second one), until it is answered within join_timeout. Before, it
// ended at request_timeout and the consumer stopped, leaving a member
// nobody ran until its session expired (e2e/ha
// TestLeaderFailsDuringALargeHandoff under load, lost2's note).
func TestFirstJoinOutlastsAFailover(t *testing.T) {
	d := driver.New(failoverConfig())
	join := only(t, d.Start(t0), driver.KindJoin)
	key := join.JoinKey
	if key == "" {
		t.Fatal("the first join's attempt carries no key")
	}
	failures := []*driver.Failure{
		{Err: fmt.Errorf("context deadline exceeded"), Earliest: -1, Latest: -1}, // the leader killed with the attempt in flight
		refused(api.CodeNotLeader, 421),                                          // a standby: no leader known yet
		noAnswer,                                                                 // the killed leader's port
		refused(api.CodeUnavailable, 503),
	}
	now, attempts := t0, 0
	for now.Before(t0.Add(12 * time.Second)) { // well past request_timeout
		if join.Timeout <= 0 || join.Timeout > 5*time.Second {
			t.Fatalf("attempt %d at %s: timeout %s, want within request_timeout (5s)", attempts, now.Sub(t0), join.Timeout)
		}
		if join.JoinKey != key {
			t.Fatalf("attempt %d carries key %q, the first %q: a second member", attempts, join.JoinKey, key)
		}
		f := failures[attempts%len(failures)]
		if f.Code == "" && attempts%len(failures) == 0 {
			now = now.Add(join.Timeout) // the attempt ran out of its time
		}
		cmds := d.Answer(driver.Answered{Now: now, Call: join.Call, Failure: f})
		if attempts == 0 {
			// The first failure is reported at once (the caller's log
			// says why it waits), with the join's end: Start + join_timeout.
			r, ok := find[driver.JoinRetrying](cmds)
			if !ok || len(cmds) != 1 || r.Err != f.Err || !r.Until.Equal(t0.Add(30*time.Second)) {
				t.Fatalf("first attempt failed %v: %+v; want one JoinRetrying until %s", f.Err, cmds, t0.Add(30*time.Second))
			}
		} else if len(cmds) != 0 {
			t.Fatalf("attempt %d at %s failed %v: %+v; want a backoff (JoinRetrying once only)", attempts, now.Sub(t0), f.Err, cmds)
		}
		attempts++
		now = d.NextDeadline()
		cmds = d.Tick(now)
		if r, ok := find[driver.JoinResult](cmds); ok {
			t.Fatalf("the first join ended %v at %s after %d attempts; want it retried until join_timeout (30s)", r.Err, now.Sub(t0), attempts)
		}
		join = only(t, cmds, driver.KindJoin)
	}
	cmds := d.Answer(driver.Answered{Now: now, Call: join.Call, Join: api.JoinResponse{MemberID: "m1", MemberToken: "member-token", SessionTimeoutMs: 10000}})
	if r, ok := find[driver.JoinResult](cmds); !ok || r.Err != nil || r.Response.MemberID != "m1" {
		t.Fatalf("answered at %s after %d attempts: %+v %t", now.Sub(t0), attempts, r, ok)
	}
}

// TestFirstJoinEndsAtJoinTimeout: a first join failing retriably ends at
// join_timeout with the last failure, and with request_timeout when
// JoinTimeout is shorter (the Kafka listener's and the simulation's
// zero).
func TestFirstJoinEndsAtJoinTimeout(t *testing.T) {
	for _, c := range []struct {
		join time.Duration
		want time.Duration
	}{{30 * time.Second, 30 * time.Second}, {0, 5 * time.Second}, {time.Second, 5 * time.Second}} {
		cfg := failoverConfig()
		cfg.JoinTimeout = c.join
		d := driver.New(cfg)
		join := only(t, d.Start(t0), driver.KindJoin)
		now := t0
		for {
			if cmds := withoutJoinRetrying(d.Answer(driver.Answered{Now: now, Call: join.Call, Failure: refused(api.CodeNotLeader, 421)})); len(cmds) != 0 {
				t.Fatalf("join_timeout %s: %+v right after a retriable failure", c.join, cmds)
			}
			now = d.NextDeadline()
			cmds := d.Tick(now)
			if r, ok := find[driver.JoinResult](cmds); ok {
				if r.Err == nil || r.Err.Error() != string(api.CodeNotLeader) || now != t0.Add(c.want) {
					t.Fatalf("join_timeout %s: ended %v at %s, want not_leader at %s", c.join, r.Err, now.Sub(t0), c.want)
				}
				break
			}
			join = only(t, cmds, driver.KindJoin)
		}
	}
}

// TestFirstJoinRefusedForGoodEndsAtOnce: past request_timeout, within a
// long join_timeout, a refusal that no retry mends (400, 401, 403) still
// ends the first join at once with its message.
func TestFirstJoinRefusedForGoodEndsAtOnce(t *testing.T) {
	for _, refusal := range []*driver.Failure{
		refused(api.CodeBadRequest, 400), refused(api.CodeUnauthorized, 401), refused(api.CodeForbidden, 403),
	} {
		d := driver.New(failoverConfig())
		join := only(t, d.Start(t0), driver.KindJoin)
		now := t0
		for now.Before(t0.Add(6 * time.Second)) {
			d.Answer(driver.Answered{Now: now, Call: join.Call, Failure: noAnswer})
			now = d.NextDeadline()
			join = only(t, d.Tick(now), driver.KindJoin)
		}
		r, ok := find[driver.JoinResult](d.Answer(driver.Answered{Now: now, Call: join.Call, Failure: refusal}))
		if !ok || r.Err == nil || r.Err.Error() != refusal.Err.Error() {
			t.Errorf("%s at %s: %+v %t, want the join ended with it at once", refusal.Code, now.Sub(t0), r, ok)
		}
	}
}
