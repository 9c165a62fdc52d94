package client

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
)

func TestJoinFetchPollDeliversInOrder(t *testing.T) {
	for _, raw := range []bool{false, true} {
		name := map[bool]string{false: "json", true: "raw"}[raw]
		t.Run(name, func(t *testing.T) {
			var e *env
			e = newEnv(t, func(int) []api.Grant {
				return []api.Grant{e.grantOf(p0, 3, 0, "cap-p0"), e.grantOf(p1, 5, 2, "cap-p1")}
			})
			e.store.append(p0, 10)
			e.store.append(p1, 9)
			cfg := e.config()
			cfg.Raw = raw
			hooks := newHookLog()
			c := e.start(cfg, hooks.options()...)
			if got := recv(t, hooks.granted, "grant hook"); !slices.Equal(got, []Partition{p0, p1}) {
				t.Fatalf("granted %v", got)
			}
			join := recv(t, e.coord.joined, "join")
			if join.InstanceID != "svc-7" || !slices.Equal(join.Topics, []string{"orders"}) || join.SessionTimeoutMs != 10000 {
				t.Fatalf("join request %+v", join)
			}
			rs := pollUntil(t, c, func(rs []Record) bool { return len(rs) >= 17 })
			checkSequence(t, rs, p0, 0, 10)
			checkSequence(t, rs, p1, 2, 9)
			r := rs[slices.IndexFunc(rs, func(r Record) bool { return r.Partition == 1 && r.Offset == 4 })]
			if string(r.Value) != "orders/1-4" || string(r.Key) != "orders/1" || r.Epoch != 5 ||
				r.Timestamp.UnixMilli() != 1700000000004 || len(r.Headers) != 1 || string(r.Headers[0].Value) != "v" {
				t.Fatalf("record %+v", r)
			}
			if got := c.Assigned(); !slices.Equal(got, []Partition{p0, p1}) {
				t.Fatalf("assigned %v", got)
			}
		})
	}
}

func TestFailoverToSecondGateway(t *testing.T) {
	cases := map[string]func(e *env){
		"503":    func(e *env) { e.gw1.setUnavailable(true) },
		"closed": func(e *env) { e.gw1.srv.Close() },
	}
	for name, breakFirst := range cases {
		t.Run(name, func(t *testing.T) {
			var e *env
			e = newEnv(t, func(int) []api.Grant { return []api.Grant{e.grantOf(p0, 1, 0, "cap-p0")} })
			e.store.append(p0, 12)
			breakFirst(e)
			c := e.start(e.config())
			rs := pollUntil(t, c, countOf(p0, 12))
			checkSequence(t, rs, p0, 0, 12)
			for _, f := range e.store.seen() {
				if f.gateway != "gw2" {
					t.Fatalf("fetch answered by %s", f.gateway)
				}
			}
			if name == "503" && e.gw1.requestCount() == 0 {
				t.Fatalf("the first gateway was never tried")
			}
		})
	}
}

// TestHeartbeatRevokeHandsOver: a revoke in a heartbeat stops the
// partition, calls OnRevoke, then commits the processed offset with the
// OLD capability and release:true; no record of it is delivered after.
func TestHeartbeatRevokeHandsOver(t *testing.T) {
	var e *env
	e = newEnv(t, func(int) []api.Grant {
		return []api.Grant{e.grantOf(p0, 1, 0, "cap-p0-e1"), e.grantOf(p1, 1, 0, "cap-p1-e1")}
	})
	e.store.append(p0, 8)
	hooks := newHookLog()
	requests := &requestLog{}
	opts := append(hooks.options(), withRequestLog(requests), OnRevoke(func(context.Context, []Partition) {
		requests.add("revoke hook")
		hooks.revoked <- []Partition{p0}
	}))
	c := e.start(e.config(), opts...)
	before := pollUntil(t, c, countOf(p0, 8))
	checkSequence(t, before, p0, 0, 8)

	e.store.append(p0, 8) // fetched, perhaps buffered, never to be delivered
	e.coord.news <- api.HeartbeatResponse{Revoke: []api.PartitionRef{{Topic: "orders", Partition: 0, Epoch: 1}}}
	if got := recv(t, hooks.revoked, "revoke hook"); !slices.Equal(got, []Partition{p0}) {
		t.Fatalf("revoked %v", got)
	}

	// Keep polling (which also marks offsets 0..7 processed) on p1.
	e.store.append(p1, 4)
	after := pollUntil(t, c, countOf(p1, 4))
	if got := offsets(after, p0); len(got) > 0 {
		t.Fatalf("records of the revoked partition delivered after OnRevoke: %v", got)
	}
	commit := recv(t, e.coord.commits, "release commit")
	want := []api.CommitOffset{{Topic: "orders", Partition: 0, Offset: 8, Capability: "cap-p0-e1"}}
	if !commit.req.Release || !slices.Equal(commit.req.Offsets, want) {
		t.Fatalf("commit %+v, want release of orders/0 at 8 with the old capability", commit.req)
	}
	if got := c.Assigned(); !slices.Equal(got, []Partition{p1}) {
		t.Fatalf("assigned %v", got)
	}
	// No fetch of the revoked partition began after the hook was called.
	e.store.append(p1, 4)
	pollUntil(t, c, countOf(p1, 4))
	if late := beginsAfter(requests.snapshot(), "revoke hook", p0Path); len(late) > 0 {
		t.Fatalf("fetches of the revoked partition after OnRevoke: %v", late)
	}
}

const p0Path = "/v1/topics/orders/partitions/0/records"

// TestGateway409StopsPartition: the gateway fences the capability while a
// fetch is held; the answer is a 409 and it is the last fetch of that
// partition. The partition is handed over like a revoke.
func TestGateway409StopsPartition(t *testing.T) {
	var e *env
	e = newEnv(t, func(int) []api.Grant {
		return []api.Grant{e.grantOf(p0, 2, 0, "cap-p0-e2"), e.grantOf(p1, 2, 0, "cap-p1-e2")}
	})
	e.store.append(p0, 4)
	hooks := newHookLog()
	requests := &requestLog{}
	c := e.start(e.config(), append(hooks.options(), withRequestLog(requests))...)
	pollUntil(t, c, countOf(p0, 4))

	e.store.revoke("cap-p0-e2")
	if got := recv(t, hooks.revoked, "revoke hook"); !slices.Equal(got, []Partition{p0}) {
		t.Fatalf("revoked %v", got)
	}
	e.store.append(p1, 4)
	pollUntil(t, c, countOf(p1, 4)) // acknowledges 0..3 of p0
	commit := recv(t, e.coord.commits, "release commit")
	want := []api.CommitOffset{{Topic: "orders", Partition: 0, Offset: 4, Capability: "cap-p0-e2"}}
	if !commit.req.Release || !slices.Equal(commit.req.Offsets, want) {
		t.Fatalf("commit %+v", commit.req)
	}
	e.store.append(p1, 4)
	pollUntil(t, c, countOf(p1, 4))
	events := requests.snapshot()
	conflict := "end " + p0Path + " 409"
	if n := slices.Index(events, conflict); n < 0 || slices.Contains(events[n+1:], conflict) {
		t.Fatalf("want exactly one 409 for the fenced partition: %v", events)
	}
	if late := beginsAfter(events, conflict, p0Path); len(late) > 0 {
		t.Fatalf("fetches of the fenced partition after its 409: %v", late)
	}
}

// TestRenewalKeepsReadingWithoutGap: a renewal swaps the capability under
// the running fetches; reading goes on at the next offset.
func TestRenewalKeepsReadingWithoutGap(t *testing.T) {
	var e *env
	e = newEnv(t, func(int) []api.Grant { return []api.Grant{e.grantOf(p0, 4, 0, "cap-old")} })
	e.store.append(p0, 4)
	c := e.start(e.config())
	first := pollUntil(t, c, countOf(p0, 4))

	e.coord.news <- api.HeartbeatResponse{Renew: []api.Grant{e.grantOf(p0, 4, 0, "cap-new")}}
	waitFor(t, "renewal applied", e.coord.newsApplied)
	waitFor(t, "a fetch with the renewed capability", func() bool {
		return slices.ContainsFunc(e.store.seen(), func(f fetchSeen) bool { return f.capability == "cap-new" })
	})
	// One fetch at a time: from now on only the new one is used; refuse the old.
	e.store.expire("cap-old", time.Now())
	e.store.append(p0, 8)
	rest := pollUntil(t, c, countOf(p0, 8))
	checkSequence(t, append(first, rest...), p0, 0, 12)
	newFrom := int64(-1)
	for _, f := range e.store.seen() {
		if f.status == http.StatusUnauthorized {
			t.Fatalf("a fetch was refused as expired: %+v", f)
		}
		if f.capability == "cap-new" && newFrom < 0 && f.status == http.StatusOK && f.records > 0 {
			newFrom = f.offset
		}
	}
	if newFrom < 4 {
		t.Fatalf("first records read with the renewed capability from %d, want >= 4 (no reset)", newFrom)
	}
}

// TestExpiringCapabilityStopsFetching: a capability about to expire with
// no renewal is not used (no 401); a late renewal resumes reading.
func TestExpiringCapabilityStopsFetching(t *testing.T) {
	var e *env
	expiry := time.Now().Add(800 * time.Millisecond)
	e = newEnv(t, func(int) []api.Grant {
		g := e.grantOf(p0, 1, 0, "cap-short")
		g.ExpiresAt = expiry.Format(time.RFC3339Nano)
		return []api.Grant{g}
	})
	e.store.expire("cap-short", expiry)
	e.store.append(p0, 2)
	c := e.start(e.config())
	pollUntil(t, c, countOf(p0, 2))
	waitFor(t, "the capability to expire", func() bool { return time.Now().After(expiry.Add(100 * time.Millisecond)) })
	for _, f := range e.store.seen() {
		if f.status == http.StatusUnauthorized {
			t.Fatalf("fetched with an expired capability: %+v", f)
		}
	}
	e.coord.news <- api.HeartbeatResponse{Renew: []api.Grant{e.grantOf(p0, 1, 0, "cap-renewed")}}
	e.store.append(p0, 3)
	rs := pollUntil(t, c, countOf(p0, 3))
	checkSequence(t, rs, p0, 2, 5)
}

func TestUnknownMemberRejoins(t *testing.T) {
	var e *env
	e = newEnv(t, func(join int) []api.Grant {
		if join == 1 {
			return []api.Grant{e.grantOf(p0, 1, 0, "cap-first")}
		}
		return []api.Grant{e.grantOf(p0, 2, 4, "cap-second")}
	})
	e.store.append(p0, 4)
	hooks := newHookLog()
	c := e.start(e.config(), hooks.options()...)
	recv(t, e.coord.joined, "first join")
	pollUntil(t, c, countOf(p0, 4))
	first := c.MemberID()

	e.coord.failures <- api.CodeUnknownMember
	if got := recv(t, hooks.lost, "lost hook"); !slices.Equal(got, []Partition{p0}) {
		t.Fatalf("lost %v", got)
	}
	again := recv(t, e.coord.joined, "rejoin")
	if again.MemberID != "" || again.InstanceID != "svc-7" {
		t.Fatalf("rejoin request %+v", again)
	}
	e.store.append(p0, 4)
	rs := pollUntil(t, c, countOf(p0, 4))
	checkSequence(t, rs, p0, 4, 8)
	if rs[0].Epoch != 2 || c.MemberID() == first {
		t.Fatalf("after rejoin: epoch %d member %q (was %q)", rs[0].Epoch, c.MemberID(), first)
	}
}

func TestCommitCommitsPolledRecords(t *testing.T) {
	var e *env
	e = newEnv(t, func(int) []api.Grant { return []api.Grant{e.grantOf(p0, 1, 0, "cap-p0")} })
	e.store.append(p0, 4)
	c := e.start(e.config())
	pollUntil(t, c, countOf(p0, 4))
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := c.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	commit := recv(t, e.coord.commits, "commit")
	want := []api.CommitOffset{{Topic: "orders", Partition: 0, Offset: 4, Capability: "cap-p0"}}
	if commit.req.Release || !slices.Equal(commit.req.Offsets, want) || commit.token != "member-token-1" {
		t.Fatalf("commit %+v by %q", commit.req, commit.token)
	}
	if err := c.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(e.coord.commits); n != 0 {
		t.Fatalf("%d commits sent with nothing new processed", n)
	}
}

func TestCloseCommitsAndLeaves(t *testing.T) {
	var e *env
	e = newEnv(t, func(int) []api.Grant { return []api.Grant{e.grantOf(p0, 1, 0, "cap-p0")} })
	e.store.append(p0, 6)
	hooks := newHookLog()
	c := e.start(e.config(), hooks.options()...)
	pollUntil(t, c, countOf(p0, 6))
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, hooks.revoked, "revoke hook on close"); !slices.Equal(got, []Partition{p0}) {
		t.Fatalf("revoked %v", got)
	}
	commit := recv(t, e.coord.commits, "final commit")
	want := []api.CommitOffset{{Topic: "orders", Partition: 0, Offset: 6, Capability: "cap-p0"}}
	if !commit.req.Release || !slices.Equal(commit.req.Offsets, want) {
		t.Fatalf("final commit %+v", commit.req)
	}
	if token := recv(t, e.coord.leaves, "leave"); token != "member-token-1" {
		t.Fatalf("left with %q", token)
	}
	if _, err := c.Poll(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("poll after close: %v", err)
	}
	if err := c.Commit(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("commit after close: %v", err)
	}
}

func TestNotJoined(t *testing.T) {
	e := newEnv(t, func(int) []api.Grant { return nil })
	c, err := NewConsumer(e.config())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.Poll(ctx); !errors.Is(err, ErrNotJoined) {
		t.Fatalf("poll: %v", err)
	}
	if err := c.Commit(ctx); !errors.Is(err, ErrNotJoined) {
		t.Fatalf("commit: %v", err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
}

func TestJoinRefusedIsTypedError(t *testing.T) {
	e := newEnv(t, func(int) []api.Grant { return nil })
	cfg := e.config()
	cfg.Credential = "wrong"
	c, err := NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Join(context.Background())
	var ce *Error
	if !errors.As(err, &ce) || ce.Code != api.CodeUnauthorized || ce.Status != http.StatusUnauthorized || ce.Op != "join" {
		t.Fatalf("join error %#v", err)
	}
	if ce.Retriable() || ce.NeedsRejoin() || ce.NeedsRefresh() {
		t.Fatalf("unauthorized classified as retriable/rejoin/refresh")
	}
}

// While the coordinator does not answer a commit, Poll keeps delivering
// the records of the partitions held; CommitAsync requests made meanwhile
// are merged into one commit of the latest offsets, sent once the first
// ended; the first one's failure is reported, not dropped.
func TestCommitAsyncKeepsPollsGoing(t *testing.T) {
	var e *env
	e = newEnv(t, func(int) []api.Grant { return []api.Grant{e.grantOf(p0, 1, 0, "cap-p0")} })
	e.store.append(p0, 4)
	c := e.start(e.config())
	pollUntil(t, c, countOf(p0, 4))
	answer := e.coord.holdCommits()
	first := c.CommitAsync()
	if got := recv(t, e.coord.commits, "first commit").req.Offsets[0].Offset; got != 4 {
		t.Fatalf("first commit at %d", got)
	}
	e.store.append(p0, 3)
	checkSequence(t, pollUntil(t, c, countOf(p0, 3)), p0, 4, 7)
	second, third := c.CommitAsync(), c.CommitAsync()
	if second != third {
		t.Fatal("two requests waiting at once: the second was not merged into the first")
	}
	select {
	case <-first.Done():
		t.Fatalf("first commit answered %v before the coordinator did", first.Err())
	default:
	}
	answer <- api.CodeForbidden
	var refused *Error
	if err := waitCommit(t, first); !errors.As(err, &refused) || refused.Code != api.CodeForbidden {
		t.Fatalf("first commit: %v, want the coordinator's forbidden", err)
	}
	merged := recv(t, e.coord.commits, "merged commit")
	if got := merged.req.Offsets[0].Offset; got != 7 || merged.req.Release {
		t.Fatalf("merged commit %+v, want offset 7", merged.req)
	}
	answer <- ""
	if err := waitCommit(t, second); err != nil {
		t.Fatalf("merged commit: %v", err)
	}
	if n := len(e.coord.commits); n != 0 {
		t.Fatalf("%d more commits sent: the requests were not merged", n)
	}
	e.coord.stopHolding() // the release at Close
}

// Commit requests never go unanswered: one waiting behind a commit in
// flight when Close starts is answered as not sent, and the one in flight
// when the consumer stops is answered ErrClosed.
func TestCommitAsyncAnsweredAtClose(t *testing.T) {
	var e *env
	e = newEnv(t, func(int) []api.Grant { return []api.Grant{e.grantOf(p0, 1, 0, "cap-p0")} })
	e.store.append(p0, 4)
	closing := make(chan struct{}, 1)
	c := e.start(e.config(), OnRevoke(func(context.Context, []Partition) { closing <- struct{}{} }))
	pollUntil(t, c, countOf(p0, 4))
	e.coord.holdCommits()
	inFlight := c.CommitAsync()
	recv(t, e.coord.commits, "commit")
	e.store.append(p0, 1)
	pollUntil(t, c, countOf(p0, 1))
	waiting := c.CommitAsync()
	ctx, cancel := context.WithCancel(context.Background())
	closed := make(chan error, 1)
	go func() { closed <- c.Close(ctx) }()
	recv(t, closing, "Close's revoke hook")
	// The release waits behind the held commit. A ctx ending while Close
	// runs leaves no time for a graceful close: everything is cut short.
	// (One that had ended before Close was called would get
	// request_timeout of Close's own: e2e/sdk
	// TestCloseWithAnEndedContextStillCommits.)
	cancel()
	if err := recv(t, closed, "close"); !errors.Is(err, context.Canceled) {
		t.Fatalf("close: %v", err)
	}
	if err := waitCommit(t, waiting); err == nil {
		t.Fatal("a commit never sent was answered nil")
	}
	if err := waitCommit(t, inFlight); !errors.Is(err, ErrClosed) {
		t.Fatalf("in-flight commit: %v, want ErrClosed", err)
	}
	if err := waitCommit(t, c.CommitAsync()); !errors.Is(err, ErrClosed) {
		t.Fatalf("commit after close: %v", err)
	}
}

// waitCommit waits (at most waitLimit) for f's outcome.
func waitCommit(t *testing.T, f *CommitFuture) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	err := f.Wait(ctx)
	if ctx.Err() != nil {
		t.Fatal("no commit outcome after", waitLimit)
	}
	return err
}

// TestFetchesAskForTheBuffersShare: the consumer's fetches ask the
// gateway for their partition's share of buffer_max_bytes, within
// [1 MiB, fetch_max_bytes]: with the defaults (16 MiB, 4 MiB) and two
// partitions every fetch asks 4 MiB, with buffer_max_bytes 6 MiB 1.5 MiB.
func TestFetchesAskForTheBuffersShare(t *testing.T) {
	for _, tc := range []struct {
		buffer int64
		want   string
	}{{16 << 20, "4194304"}, {6 << 20, "1572864"}} {
		var e *env
		e = newEnv(t, func(int) []api.Grant {
			return []api.Grant{e.grantOf(p0, 1, 0, "cap-p0"), e.grantOf(p1, 1, 0, "cap-p1")}
		})
		e.store.append(p0, 3)
		e.store.append(p1, 3)
		cfg := e.config()
		cfg.BufferMaxBytes = tc.buffer
		c := e.start(cfg)
		pollUntil(t, c, func(rs []Record) bool { return len(rs) >= 6 })
		seen := e.store.seen()
		if len(seen) == 0 {
			t.Fatal("no fetch seen")
		}
		for _, f := range seen {
			if f.maxBytes != tc.want {
				t.Fatalf("buffer %d: a fetch of %v asked max_bytes %s, want %s", tc.buffer, f.partition, f.maxBytes, tc.want)
			}
		}
	}
}
