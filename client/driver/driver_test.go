package driver_test

import (
	"errors"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client/driver"
	"github.com/capgate/capgate/client/session"
)

var t0 = time.Unix(1_900_000_000, 0)

func config() driver.Config {
	return driver.Config{
		Join: api.JoinRequest{Topics: []string{"t"}}, Gateways: 3,
		HeartbeatWait: 3 * time.Second, FetchMaxWait: 500 * time.Millisecond, RequestTimeout: 10 * time.Second,
		RetryBackoff: 100 * time.Millisecond, RetryBackoffMax: time.Second,
		Session: session.Config{BufferMaxBytes: 1 << 20, PollMaxRecords: 100, RevokeTimeout: 5 * time.Second, ExpiryMargin: time.Second, FullChecks: true},
		Rand:    func(n int64) int64 { return n - 1 }, // the top of every jitter range
	}
}

// sends returns the Send commands among cmds.
func sends(cmds []driver.Command) []driver.Send {
	var out []driver.Send
	for _, c := range cmds {
		if s, ok := c.(driver.Send); ok {
			out = append(out, s)
		}
	}
	return out
}

// ofKind returns the one Send of kind among cmds.
func ofKind(t *testing.T, cmds []driver.Command, kind driver.Kind) driver.Send {
	t.Helper()
	var out []driver.Send
	for _, s := range sends(cmds) {
		if s.Kind == kind {
			out = append(out, s)
		}
	}
	if len(out) != 1 {
		t.Fatalf("sends %+v, want one of kind %d", sends(cmds), kind)
	}
	return out[0]
}

// withoutJoinRetrying is cmds less the first join's JoinRetrying (the
// report of its first failure, TestFirstJoinOutlastsAFailover checks it).
func withoutJoinRetrying(cmds []driver.Command) []driver.Command {
	var out []driver.Command
	for _, c := range cmds {
		if _, ok := c.(driver.JoinRetrying); !ok {
			out = append(out, c)
		}
	}
	return out
}

func only(t *testing.T, cmds []driver.Command, kind driver.Kind) driver.Send {
	t.Helper()
	s := sends(cmds)
	if len(s) != 1 || s[0].Kind != kind {
		t.Fatalf("sends %+v, want one of kind %d", s, kind)
	}
	return s[0]
}

func find[T any](cmds []driver.Command) (T, bool) {
	for _, c := range cmds {
		if v, ok := c.(T); ok {
			return v, true
		}
	}
	var zero T
	return zero, false
}

func refused(code api.Code, status int) *driver.Failure {
	return &driver.Failure{Code: code, Status: status, Err: errors.New(string(code)), Earliest: -1, Latest: -1}
}

var noAnswer = &driver.Failure{Err: errors.New("connection refused"), Earliest: -1, Latest: -1}

// joined starts a driver and answers its join with grants of partitions
// 0..n-1 of t; it returns the driver and the first commands after.
func joined(t *testing.T, cfg driver.Config, n int) (*driver.Driver, []driver.Command) {
	t.Helper()
	d := driver.New(cfg)
	join := only(t, d.Start(t0), driver.KindJoin)
	resp := api.JoinResponse{MemberID: "m1", MemberToken: "member-token", SessionTimeoutMs: 10000, HeartbeatWaitMs: 3000}
	if cfg.Join.SessionTimeoutMs > 0 { // the coordinator takes a join's session timeout
		resp.SessionTimeoutMs = cfg.Join.SessionTimeoutMs
	}
	for p := range int32(n) {
		resp.Grants = append(resp.Grants, api.Grant{Topic: "t", Partition: p, Epoch: 1, Offset: 0, Capability: "cap",
			ExpiresAt: t0.Add(time.Minute).UTC().Format(time.RFC3339)})
	}
	cmds := d.Answer(driver.Answered{Now: t0, Call: join.Call, Join: resp})
	if r, ok := find[driver.JoinResult](cmds); !ok || r.Err != nil {
		t.Fatalf("join result %+v %t", r, ok)
	}
	return d, cmds
}

// TestFirstJoinIsBounded: the first join is retried after backoffs while
// it fails retriably, and gives up at request_timeout with the last
// failure; a final refusal ends it at once.
func TestFirstJoinIsBounded(t *testing.T) {
	d := driver.New(config())
	join := only(t, d.Start(t0), driver.KindJoin)
	now := t0
	for attempt := 0; ; attempt++ {
		cmds := withoutJoinRetrying(d.Answer(driver.Answered{Now: now, Call: join.Call, Failure: refused(api.CodeUnavailable, 503)}))
		if len(cmds) != 0 {
			t.Fatalf("attempt %d: %+v right after a retriable failure; want a backoff", attempt, cmds)
		}
		now = d.NextDeadline()
		cmds = d.Tick(now)
		if r, ok := find[driver.JoinResult](cmds); ok {
			if r.Err == nil || r.Err.Error() != string(api.CodeUnavailable) || now != t0.Add(10*time.Second) || attempt < 5 {
				t.Fatalf("join ended %v at %s after %d attempts", r.Err, now.Sub(t0), attempt)
			}
			break
		}
		join = only(t, cmds, driver.KindJoin)
	}
	d = driver.New(config())
	join = only(t, d.Start(t0), driver.KindJoin)
	r, ok := find[driver.JoinResult](d.Answer(driver.Answered{Now: t0, Call: join.Call, Failure: refused(api.CodeForbidden, 403)}))
	if !ok || r.Err == nil {
		t.Fatalf("a forbidden join: %+v", r)
	}
}

// TestFetchFailsOver: a fetch whose gateway is unreachable or answers
// 5xx moves to the next gateway at once (and every later fetch starts
// there); once every gateway failed in a row it backs off.
func TestFetchFailsOver(t *testing.T) {
	d, cmds := joined(t, config(), 1)
	fetch := ofKind(t, cmds, driver.KindFetch)
	if fetch.Gateway != 0 {
		t.Fatalf("first fetch to gateway %d", fetch.Gateway)
	}
	fetch = only(t, d.Answer(driver.Answered{Now: t0, Call: fetch.Call, Failure: noAnswer}), driver.KindFetch)
	if fetch.Gateway != 1 {
		t.Fatalf("after gateway 0 failed: gateway %d, want 1", fetch.Gateway)
	}
	fetch = only(t, d.Answer(driver.Answered{Now: t0, Call: fetch.Call, Failure: refused(api.CodeOutOfSync, 503)}), driver.KindFetch)
	if fetch.Gateway != 2 {
		t.Fatalf("after gateway 1 failed: gateway %d, want 2", fetch.Gateway)
	}
	if cmds := d.Answer(driver.Answered{Now: t0, Call: fetch.Call, Failure: noAnswer}); len(sends(cmds)) != 0 {
		t.Fatalf("every gateway failed, yet %+v at once", cmds)
	}
	fetch = only(t, d.Tick(d.NextDeadline()), driver.KindFetch)
	if fetch.Gateway != 0 {
		t.Fatalf("after the backoff: gateway %d, want 0", fetch.Gateway)
	}
	// A final refusal goes to the session: a 409 stops the partition.
	cmds = d.Answer(driver.Answered{Now: t0.Add(time.Second), Call: fetch.Call, Failure: refused(api.CodeCapabilityRevoked, 409)})
	if _, ok := find[session.CallRevoke](cmds); !ok || len(sends(cmds)) != 0 || len(d.Session().Assigned()) != 0 {
		t.Fatalf("after a 409: %+v, assigned %v; want the partition stopped", cmds, d.Session().Assigned())
	}
}

// TestCancelledFetchAnswerIsDropped: a revoke cancels the fetch in
// flight; the session is told at once, and the late answer with records
// is dropped — unless the planted bug hands it to the user.
func TestCancelledFetchAnswerIsDropped(t *testing.T) {
	for _, bug := range []bool{false, true} {
		cfg := config()
		cfg.Bugs.DeliverAfterRevoke = bug
		d, cmds := joined(t, cfg, 1)
		fetch, beat := ofKind(t, cmds, driver.KindFetch), ofKind(t, cmds, driver.KindHeartbeat)
		cmds = d.Answer(driver.Answered{Now: t0, Call: beat.Call, News: api.HeartbeatResponse{Revoke: []api.PartitionRef{{Topic: "t", Partition: 0, Epoch: 1}}}})
		if c, ok := find[driver.Cancel](cmds); !ok || c.Call != fetch.Call {
			t.Fatalf("revoke: %+v, want the fetch cancelled", cmds)
		}
		late := d.Answer(driver.Answered{Now: t0, Call: fetch.Call, Fetched: driver.Fetched{Records: 2, Next: 2}})
		if _, delivered := find[session.Deliver](late); delivered != bug {
			t.Fatalf("bug %t: late answer gave %+v", bug, late)
		}
	}
}

// TestCommitRetriedUntilRequestTimeout: a commit is retried while it
// fails retriably (a coordinator blip) and ends at request_timeout with
// the last failure.
func TestCommitRetriedUntilRequestTimeout(t *testing.T) {
	d, cmds := joined(t, config(), 1)
	fetch := ofKind(t, cmds, driver.KindFetch)
	d.Answer(driver.Answered{Now: t0, Call: fetch.Call, Fetched: driver.Fetched{Records: 3, Bytes: 30, Next: 3}})
	d.User(session.Polled{Now: t0}) // delivers offsets 0..2
	cmds = d.User(session.CommitRequested{Now: t0, Ticket: 1})
	commit := ofKind(t, cmds, driver.KindCommit)
	if len(commit.Commit.Offsets) != 1 || commit.Commit.Offsets[0].Offset != 3 {
		t.Fatalf("commit %+v, want offset 3", commit.Commit)
	}
	now := t0
	for {
		cmds = d.Answer(driver.Answered{Now: now, Call: commit.Call, Failure: refused(api.CodeUnavailable, 503)})
		now = d.NextDeadline()
		cmds = d.Tick(now)
		if r, ok := find[session.CommitResult](cmds); ok {
			if r.Code != api.CodeUnavailable || !now.Equal(t0.Add(10*time.Second)) {
				t.Fatalf("commit ended %+v at %s", r, now.Sub(t0))
			}
			return
		}
		var found bool
		for _, s := range sends(cmds) {
			if s.Kind == driver.KindCommit {
				commit, found = s, true
			}
		}
		if !found {
			t.Fatalf("at %s: %+v, want the commit again", now.Sub(t0), cmds)
		}
	}
}

// TestUnknownMemberRejoins: a heartbeat refused with unknown_member makes
// the session lose everything and the driver join again (no heartbeat
// until it did).
func TestUnknownMemberRejoins(t *testing.T) {
	d, cmds := joined(t, config(), 1)
	beat := ofKind(t, cmds, driver.KindHeartbeat)
	cmds = d.Answer(driver.Answered{Now: t0, Call: beat.Call, Failure: refused(api.CodeUnknownMember, 409)})
	join := only(t, cmds, driver.KindJoin)
	if r, ok := find[session.CallRevoke](cmds); !ok || !r.Lost {
		t.Fatalf("partitions not lost: %+v", cmds)
	}
	cmds = d.Answer(driver.Answered{Now: t0, Call: join.Call, Join: api.JoinResponse{MemberID: "m2", MemberToken: "t2", SessionTimeoutMs: 10000, HeartbeatWaitMs: 3000}})
	if _, again := find[driver.JoinResult](cmds); again || d.Session().Member().ID != "m2" {
		t.Fatalf("rejoin: %+v, member %q", cmds, d.Session().Member().ID)
	}
	if beat := only(t, cmds, driver.KindHeartbeat); beat.Token != "t2" {
		t.Fatalf("heartbeat with %q, want the new member's token", beat.Token)
	}
}

// TestFetchNotFoundAbortsAndReleases: a gateway answering a fetch 404
// (no such route: a wrong gateway URL; or an unknown topic or partition)
// is reported to the user at once, and the consumer releases everything
// it holds (commit with release) and leaves, instead of holding
// partitions nobody else in the group can read.
func TestFetchNotFoundAbortsAndReleases(t *testing.T) {
	d, cmds := joined(t, config(), 2)
	var fetches []driver.Send
	for _, s := range sends(cmds) {
		if s.Kind == driver.KindFetch {
			fetches = append(fetches, s)
		}
	}
	cmds = d.Answer(driver.Answered{Now: t0, Call: fetches[0].Call, Failure: refused(api.CodeNotFound, 404)})
	a, ok := find[driver.Aborted](cmds)
	if !ok || a.Err == nil {
		t.Fatalf("after a 404: %+v, want Aborted", cmds)
	}
	if c, ok := find[driver.Cancel](cmds); !ok || c.Call != fetches[1].Call {
		t.Fatalf("after a 404: %+v, want the other fetch cancelled", cmds)
	}
	r, ok := find[session.CallRevoke](cmds)
	if !ok || r.Lost || len(r.Partitions) != 2 {
		t.Fatalf("after a 404: %+v, want both partitions revoked", cmds)
	}
	cmds = d.User(session.HookDone{Now: t0, ID: r.ID})
	commit := ofKind(t, cmds, driver.KindCommit)
	if !commit.Commit.Release || len(commit.Commit.Offsets) != 2 {
		t.Fatalf("commit %+v, want a release of both", commit.Commit)
	}
	cmds = d.Answer(driver.Answered{Now: t0, Call: commit.Call})
	leave := ofKind(t, cmds, driver.KindLeave)
	cmds = d.Answer(driver.Answered{Now: t0, Call: leave.Call})
	if _, ok := find[session.Stop](cmds); !ok {
		t.Fatalf("after the leave: %+v, want Stop", cmds)
	}
}

// TestTLSRefusalFailsFast: a join whose TLS handshake was refused (the
// server's certificate not trusted) is not retried: the first join ends
// at once with that error, while a connection refused is retried.
func TestTLSRefusalFailsFast(t *testing.T) {
	d := driver.New(config())
	join := only(t, d.Start(t0), driver.KindJoin)
	certErr := errors.New("x509: certificate signed by unknown authority")
	cmds := d.Answer(driver.Answered{Now: t0, Call: join.Call, Failure: &driver.Failure{Final: true, Err: certErr, Earliest: -1, Latest: -1}})
	if r, ok := find[driver.JoinResult](cmds); !ok || r.Err != certErr {
		t.Fatalf("after a TLS refusal: %+v, want the join ended with it", cmds)
	}
	d = driver.New(config())
	join = only(t, d.Start(t0), driver.KindJoin)
	if cmds := withoutJoinRetrying(d.Answer(driver.Answered{Now: t0, Call: join.Call, Failure: noAnswer})); len(cmds) != 0 {
		t.Fatalf("after connection refused: %+v, want a retry after a backoff", cmds)
	}
}

// TestHeartbeatMarginWithReplicas: with one coordinator a heartbeat may
// take request_timeout beyond its wait, a commit attempt request_timeout;
// with replicas only half of what the session leaves after two waits
// (≥ 250 ms, ≤ request_timeout), so a member whose heartbeat or release
// a silent replica holds asks the next one in time (its session at the
// standby that took over, its handoff). The session is the one the
// coordinator answered: a join naming none (the simulation's consumer)
// gets the group's, 10 s here, so 2 s; before, the margin was computed
// from the join's 0 and came out at the 250 ms floor. The wait is the
// one the coordinator holds a heartbeat for: the smaller of the config's
// and the heartbeat_wait answered (3 s here). The Kafka listener's
// members ask for 10 s: counted at 10 s, the margin sat at the 250 ms
// floor.
func TestHeartbeatMarginWithReplicas(t *testing.T) {
	for _, c := range []struct {
		replicas bool
		session  time.Duration
		wait     time.Duration // Config.HeartbeatWait (0: 3 s)
		want     time.Duration // beyond the wait
	}{
		{false, 10 * time.Second, 0, 10 * time.Second},
		{true, 10 * time.Second, 0, 2 * time.Second}, // the SDK's defaults: (10 − 2×3) / 2
		{true, 5 * time.Second, 0, 250 * time.Millisecond},
		{true, time.Minute, 0, 10 * time.Second},
		{true, 0, 0, 2 * time.Second},                          // answered 10 s
		{true, 0, 10 * time.Second, 2 * time.Second},           // the Kafka listener's: held 3 s, not 10
		{true, 10 * time.Second, time.Second, 4 * time.Second}, // asks for less than answered: (10 − 2×1) / 2
	} {
		cfg := config()
		cfg.Replicas, cfg.Join.SessionTimeoutMs = c.replicas, c.session.Milliseconds()
		if c.wait > 0 {
			cfg.HeartbeatWait = c.wait
		}
		d, cmds := joined(t, cfg, 1)
		hb := ofKind(t, cmds, driver.KindHeartbeat)
		if got := hb.Timeout - hb.Wait; got != c.want {
			t.Errorf("replicas %t, session %s: heartbeat timeout %s = wait %s + %s, want + %s", c.replicas, c.session, hb.Timeout, hb.Wait, got, c.want)
		}
		// A commit attempt gets the margin too (no wait of its own): past
		// it another attempt goes out (hedge), the first left running.
		fetch := ofKind(t, cmds, driver.KindFetch)
		d.Answer(driver.Answered{Now: t0, Call: fetch.Call, Fetched: driver.Fetched{Records: 1, Bytes: 10, Next: 1}})
		d.User(session.Polled{Now: t0})
		commit := ofKind(t, d.User(session.CommitRequested{Now: t0, Ticket: 1}), driver.KindCommit)
		if commit.Timeout != 10*time.Second || commit.Hedge {
			t.Errorf("replicas %t, session %s: commit attempt timeout %s (hedge %t), want request_timeout", c.replicas, c.session, commit.Timeout, commit.Hedge)
		}
		if !c.replicas || c.want >= 10*time.Second { // no hedge past request_timeout
			continue
		}
		if early := sends(d.Tick(t0.Add(c.want - time.Millisecond))); len(early) > 0 && early[0].Kind == driver.KindCommit {
			t.Errorf("session %s: commit hedged before the margin: %+v", c.session, early)
		}
		cmds = d.Tick(t0.Add(c.want))
		if hedge := ofKind(t, cmds, driver.KindCommit); !hedge.Hedge || hedge.Call == commit.Call {
			t.Errorf("session %s: at the margin %+v, want a hedge", c.session, hedge)
		}
		if cancel, ok := find[driver.Cancel](cmds); ok {
			t.Errorf("session %s: the first attempt cancelled at the margin: %+v", c.session, cancel)
		}
	}
}

// TestJoinAttemptMarginWithReplicas: with replicas a join attempt — the
// first join, a rejoin, a renewal's carry-over — gives up after the
// heartbeat margin (at least a quarter of request_timeout) and the retry
// goes to the next replica within the join's request_timeout: a paused
// leader held the whole request_timeout and the first join failed
// (e2e/ha TestFirstJoinPastAPausedLeader). With one coordinator the
// attempt has the whole request_timeout.
func TestJoinAttemptMarginWithReplicas(t *testing.T) {
	for _, c := range []struct {
		replicas bool
		session  time.Duration
		want     time.Duration
	}{
		{false, 10 * time.Second, 10 * time.Second},
		{true, 10 * time.Second, 2500 * time.Millisecond}, // a quarter of request_timeout above the 2 s margin
		{true, 0, 2500 * time.Millisecond},                // no session known before the first answer
		{true, time.Minute, 10 * time.Second},
	} {
		cfg := config()
		cfg.Replicas, cfg.Join.SessionTimeoutMs = c.replicas, c.session.Milliseconds()
		d := driver.New(cfg)
		join := only(t, d.Start(t0), driver.KindJoin)
		if join.Timeout != c.want {
			t.Errorf("replicas %t, session %s: first join attempt timeout %s, want %s", c.replicas, c.session, join.Timeout, c.want)
		}
		if c.want == cfg.RequestTimeout {
			continue
		}
		// The attempt given up: the retry follows within the first
		// join's request_timeout, not after it.
		at := t0.Add(join.Timeout)
		d.Answer(driver.Answered{Now: at, Call: join.Call, Failure: noAnswer})
		retried := false
		for now := at; now.Before(t0.Add(cfg.RequestTimeout)) && !retried; now = now.Add(100 * time.Millisecond) {
			for _, s := range sends(d.Tick(now)) {
				retried = retried || s.Kind == driver.KindJoin
			}
		}
		if !retried {
			t.Errorf("replicas, session %s: no join retried within request_timeout after the attempt was given up", c.session)
		}
	}
}

// TestDriverHedgesASlowCommit: with replicas a commit attempt silent past
// the margin is left running and another sent (Send.Hedge): the replica
// may be frozen (the hedge reaches the standby) or leading and writing it
// to a slow state log (the first attempt answers once the write commits).
// The first success decides and the other attempts are cancelled; a
// refusal waits for the attempts still in flight; a retriable failure of
// the latest attempt is retried, the earlier ones still running; at most
// two earlier attempts stay in flight (no more hedges past them, the
// oldest never given up: at a slow log it is the first answered). Before, each attempt was given up
// at the margin: with every log write slower than it, a commit that had
// landed was reported failed at request_timeout.
func TestDriverHedgesASlowCommit(t *testing.T) {
	const margin = 2 * time.Second // (10 s − 2×3 s) / 2
	start := func(t *testing.T) (*driver.Driver, driver.Send, driver.Send) {
		t.Helper()
		cfg := config()
		cfg.Replicas = true
		d, cmds := joined(t, cfg, 1)
		fetch := ofKind(t, cmds, driver.KindFetch)
		d.Answer(driver.Answered{Now: t0, Call: fetch.Call, Fetched: driver.Fetched{Records: 1, Bytes: 10, Next: 1}})
		d.User(session.Polled{Now: t0})
		first := ofKind(t, d.User(session.CommitRequested{Now: t0, Ticket: 1}), driver.KindCommit)
		hedge := ofKind(t, d.Tick(t0.Add(margin)), driver.KindCommit)
		return d, first, hedge
	}
	result := func(t *testing.T, cmds []driver.Command, want api.Code, cancelled uint64) {
		t.Helper()
		r, ok := find[session.CommitResult](cmds)
		if !ok || r.Code != want {
			t.Fatalf("%+v: want the commit ended %q", cmds, want)
		}
		if c, ok := find[driver.Cancel](cmds); cancelled != 0 && (!ok || c.Call != cancelled) {
			t.Errorf("%+v: want attempt %d cancelled", cmds, cancelled)
		}
	}
	at := t0.Add(margin + 500*time.Millisecond)

	t.Run("the slow attempt answers", func(t *testing.T) {
		d, first, hedge := start(t)
		result(t, d.Answer(driver.Answered{Now: at, Call: first.Call}), "", hedge.Call)
	})
	t.Run("the hedge answers", func(t *testing.T) {
		d, first, hedge := start(t)
		result(t, d.Answer(driver.Answered{Now: at, Call: hedge.Call}), "", first.Call)
	})
	t.Run("a refusal waits for the attempt in flight", func(t *testing.T) {
		d, first, hedge := start(t)
		if cmds := d.Answer(driver.Answered{Now: at, Call: hedge.Call, Failure: refused(api.CodeStaleEpoch, 409)}); len(cmds) != 0 {
			t.Fatalf("a refusal while the first attempt is in flight: %+v, want nothing yet", cmds)
		}
		result(t, d.Answer(driver.Answered{Now: at, Call: first.Call}), "", 0)
	})
	t.Run("a refusal decides once nothing else is in flight", func(t *testing.T) {
		d, first, hedge := start(t)
		d.Answer(driver.Answered{Now: at, Call: hedge.Call, Failure: refused(api.CodeStaleEpoch, 409)})
		result(t, d.Answer(driver.Answered{Now: at, Call: first.Call, Failure: noAnswer}), api.CodeStaleEpoch, 0)
	})
	t.Run("a frozen replica: the hedge's retry lands", func(t *testing.T) {
		d, first, hedge := start(t)
		if cmds := d.Answer(driver.Answered{Now: at, Call: hedge.Call, Failure: refused(api.CodeUnavailable, 503)}); len(sends(cmds)) != 0 {
			t.Fatalf("%+v: want a backoff", cmds)
		}
		retry := ofKind(t, d.Tick(d.NextDeadline()), driver.KindCommit)
		result(t, d.Answer(driver.Answered{Now: at, Call: retry.Call}), "", first.Call)
	})
	t.Run("three attempts in flight at most, the first kept", func(t *testing.T) {
		d, first, _ := start(t)
		now := t0.Add(2 * margin)
		ofKind(t, d.Tick(now), driver.KindCommit) // the second hedge
		for range 2 {
			now = now.Add(margin)
			if cmds := d.Tick(now); len(cmds) != 0 {
				t.Fatalf("three attempts in flight: %+v, want no more hedges and none given up", cmds)
			}
		}
		result(t, d.Answer(driver.Answered{Now: now, Call: first.Call}), "", 0)
	})
	t.Run("request_timeout with attempts in flight", func(t *testing.T) {
		d, _, _ := start(t)
		var cmds []driver.Command
		for now := t0.Add(margin); !now.After(t0.Add(10 * time.Second)); now = now.Add(margin) {
			cmds = d.Tick(now)
		}
		r, ok := find[session.CommitResult](cmds)
		if !ok || r.Err == nil || r.Err.Error() != "client: request_timeout passed without an answer" {
			t.Fatalf("%+v: want the commit ended at request_timeout", cmds)
		}
	})
}

// TestJoinPastASlowLeader: with replicas, a leader that is alive but
// answers every join 3 s, or 5.5 s, after it was sent (a state log whose
// writes take 2.5 s: a join's own write, and the one in flight it
// queued behind, on a loaded machine) — past the first attempt's margin
// (2.5 s). Every attempt reaches the leader and is written whether or
// not the driver still waits for it, so each one given up leaves a
// member nobody heartbeats, holding its share of the group's partitions
// until session_timeout. After the first attempt given up (which moved the
// replica list on, past a frozen replica) the next wait request_timeout:
// the first join succeeds within its request_timeout having left at
// most one such member, and so does a rejoin. Before, every attempt was
// given up at the margin: the first join failed after four attempts
// (three members left behind), and a rejoin made one every 2.6 s for
// ever.
func TestJoinPastASlowLeader(t *testing.T) {
	for _, slow := range []time.Duration{3 * time.Second, 5500 * time.Millisecond} {
		t.Run(slow.String(), func(t *testing.T) { joinPastASlowLeader(t, slow) })
	}
}

func joinPastASlowLeader(t *testing.T, slow time.Duration) {
	cfg := config()
	cfg.Replicas, cfg.Join.SessionTimeoutMs = true, 10000
	type attempt struct {
		call uint64
		end  time.Time // answered, or given up by the shell
		ok   bool
	}
	// run drives d from now until a join is answered or until; it
	// returns how many join attempts were sent and whether one was
	// answered.
	run := func(d *driver.Driver, now, until time.Time, cmds []driver.Command) (sent int, answered bool, result *driver.JoinResult) {
		var flight []attempt
		for {
			for _, c := range cmds {
				switch c := c.(type) {
				case driver.Send:
					if c.Kind == driver.KindJoin {
						sent++
						flight = append(flight, attempt{c.Call, now.Add(min(c.Timeout, slow)), c.Timeout >= slow})
					}
				case driver.Cancel:
					for i := range flight {
						if flight[i].call == c.Call {
							flight = append(flight[:i], flight[i+1:]...)
							break
						}
					}
				case driver.JoinResult:
					result = &c
				}
			}
			if answered || (result != nil && result.Err != nil) {
				return sent, answered, result
			}
			next := d.NextDeadline()
			first := -1
			for i, a := range flight {
				if first < 0 || a.end.Before(flight[first].end) {
					first = i
				}
			}
			if first >= 0 && (next.IsZero() || !next.Before(flight[first].end)) {
				a := flight[first]
				flight = append(flight[:first], flight[first+1:]...)
				now = a.end
				if now.After(until) {
					return sent, answered, result
				}
				if a.ok {
					answered = true
					cmds = d.Answer(driver.Answered{Now: now, Call: a.call, Join: api.JoinResponse{MemberID: "m", MemberToken: "member-token",
						SessionTimeoutMs: 10000, HeartbeatWaitMs: 3000}})
				} else {
					cmds = d.Answer(driver.Answered{Now: now, Call: a.call, Failure: noAnswer})
				}
				continue
			}
			if next.IsZero() || next.After(until) {
				return sent, answered, result
			}
			now = next
			cmds = d.Tick(now)
		}
	}

	d := driver.New(cfg)
	sent, answered, result := run(d, t0, t0.Add(time.Minute), d.Start(t0))
	if !answered || result == nil || result.Err != nil {
		t.Fatalf("first join past a leader answering in %s: answered %t, result %+v (%d attempts)", slow, answered, result, sent)
	}
	if sent > 2 {
		t.Errorf("first join: %d attempts, %d members left behind at the leader; want at most 1", sent, sent-1)
	}

	// A rejoin (the member was removed): retried without end.
	d, cmds := joined(t, cfg, 0)
	beat := ofKind(t, cmds, driver.KindHeartbeat)
	cmds = d.Answer(driver.Answered{Now: t0, Call: beat.Call, Failure: refused(api.CodeUnknownMember, 409)})
	sent, answered, _ = run(d, t0, t0.Add(time.Minute), cmds)
	if !answered {
		t.Fatalf("rejoin past a leader answering in %s: not joined in a minute, %d attempts (each a member left behind)", slow, sent)
	}
	if sent > 2 {
		t.Errorf("rejoin: %d attempts, %d members left behind at the leader; want at most 1", sent, sent-1)
	}
}

// TestJoinAttemptsCarryOneKey: every attempt of one join carries the
// same key (Send.JoinKey: the Idempotency-Key header), so a coordinator
// that wrote an attempt the driver gave up on (a leader slower than the
// margin) answers the retry with the member it made; the next join (a
// rejoin after the member was removed) carries a key of its own.
func TestJoinAttemptsCarryOneKey(t *testing.T) {
	cfg := config()
	cfg.Replicas, cfg.Join.SessionTimeoutMs = true, 10000
	var draws int64
	cfg.Rand = func(n int64) int64 { draws++; return draws % n }
	d := driver.New(cfg)
	first := only(t, d.Start(t0), driver.KindJoin)
	if first.JoinKey == "" {
		t.Fatal("the first join's attempt carries no key")
	}
	now := t0.Add(first.Timeout) // given up: the shell cancels it, no answer
	d.Answer(driver.Answered{Now: now, Call: first.Call, Failure: noAnswer})
	retry := only(t, d.Tick(d.NextDeadline()), driver.KindJoin)
	if retry.JoinKey != first.JoinKey {
		t.Fatalf("the retry's key %q, the first attempt's %q: want the same", retry.JoinKey, first.JoinKey)
	}

	d, cmds := joined(t, cfg, 0)
	beat := ofKind(t, cmds, driver.KindHeartbeat)
	rejoin := only(t, d.Answer(driver.Answered{Now: t0, Call: beat.Call, Failure: refused(api.CodeUnknownMember, 409)}), driver.KindJoin)
	d.Answer(driver.Answered{Now: t0, Call: rejoin.Call, Failure: noAnswer})
	again := only(t, d.Tick(d.NextDeadline()), driver.KindJoin)
	if rejoin.JoinKey == "" || again.JoinKey != rejoin.JoinKey {
		t.Fatalf("rejoin attempts carry keys %q and %q: want one key", rejoin.JoinKey, again.JoinKey)
	}
	if rejoin.JoinKey == first.JoinKey {
		t.Fatalf("the rejoin reuses the key %q of another join", rejoin.JoinKey)
	}
}
