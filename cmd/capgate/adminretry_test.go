package main

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/internal/coordinators"
	"github.com/capgate/capgate/internal/coordinators/coordinatorstest"
)

// electing is a replica in front of a real coordinator: it answers the
// first notLeader requests 421 not_leader naming no leader (a replica
// mid-election, coordinator.Replica.notLeaderMessage's words), then
// passes every request on; with cut, it instead reads a request it
// passes on and closes the connection before the answer (an answer lost
// after the request landed).
type electing struct {
	notLeader int64
	cut       bool
	seen      atomic.Int64 // requests received
	passed    atomic.Int64 // requests passed on to the coordinator
}

func (e *electing) start(t *testing.T, coordinator string) string {
	t.Helper()
	target, err := url.Parse(coordinator)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if e.seen.Add(1) <= e.notLeader {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusMisdirectedRequest)
			_, _ = w.Write(api.EncodeError(api.CodeNotLeader, "replica r1 does not lead (candidate); no leader known yet: retry another coordinator", map[string]any{"leader": ""}))
			return
		}
		e.passed.Add(1)
		if !e.cut {
			proxy.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		proxy.ServeHTTP(rec, r) // it landed
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close() // the answer is lost
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func shortRetry(t *testing.T, budget time.Duration) {
	old := adminRetry
	adminRetry = coordinators.Retry{Budget: budget, Base: 20 * time.Millisecond, Max: 100 * time.Millisecond}
	t.Cleanup(func() { adminRetry = old })
}

// TestAdminWaitsOutAnElection: `admin client-credential` (the POST the
// harness's ClientCredential sends too) against replicas mid-election —
// 421 not_leader with no leader to follow — is sent again until one
// leads, then answered; it was refused at the first 421 before. With no
// leader within the budget, the error says what happened and that the
// request was not carried out. A POST whose answer was lost after it
// landed is not sent again (a second credential would be minted); a GET
// is.
func TestAdminWaitsOutAnElection(t *testing.T) {
	base, admin := startCoordinator(t)
	create := []string{"admin", "client-credential", "--name", "svc", "--groups", "g", "--token", admin, "-o", "json"}

	t.Run("leader elected", func(t *testing.T) {
		shortRetry(t, 10*time.Second)
		e := &electing{notLeader: 3}
		out, err := run(t, append(create, "--coordinator", e.start(t, base))...)
		if err != nil || !strings.Contains(out, "client_credential") {
			t.Fatalf("client-credential during an election: %v\n%s", err, out)
		}
		if e.seen.Load() != 4 || e.passed.Load() != 1 {
			t.Fatalf("%d requests, %d passed on: want 4 and 1 (three not_leader, one answered)", e.seen.Load(), e.passed.Load())
		}
	})

	t.Run("no leader within the budget", func(t *testing.T) {
		shortRetry(t, 500*time.Millisecond)
		e := &electing{notLeader: 1 << 30}
		_, err := run(t, append(create, "--coordinator", e.start(t, base))...)
		if err == nil {
			t.Fatal("succeeded with no leader")
		}
		for _, want := range []string{"421", "not_leader", "no coordinator replica led after", "the request was not carried out"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error lacks %q: %v", want, err)
			}
		}
		if n := e.seen.Load(); n < 3 {
			t.Errorf("%d attempts within 500ms, want several", n)
		}
	})

	t.Run("a leader outside the list", func(t *testing.T) {
		shortRetry(t, 2*time.Second)
		standby, calls := coordinatorstest.Standby(t, "http://127.0.0.1:1", true)
		_, err := run(t, append(create, "--coordinator", standby.URL)...)
		if err == nil || !strings.Contains(err.Error(), "http://127.0.0.1:1, is not among --coordinator's URLs") || calls.Load() != 1 {
			t.Fatalf("%d calls, error %v: want one call and the leader named", calls.Load(), err)
		}
	})

	t.Run("answer lost after a POST landed", func(t *testing.T) {
		shortRetry(t, 2*time.Second)
		e := &electing{cut: true}
		_, err := run(t, append(create, "--coordinator", e.start(t, base))...)
		if err == nil || !strings.Contains(err.Error(), "not retried: a POST may have been carried out") {
			t.Fatalf("error %v, want it to say the POST was not retried", err)
		}
		if e.passed.Load() != 1 {
			t.Fatalf("the POST was sent %d times, want once", e.passed.Load())
		}
		g := &electing{cut: true}
		_, err = run(t, "admin", "groups", "--token", admin, "--coordinator", g.start(t, base))
		if err == nil || g.passed.Load() < 2 {
			t.Fatalf("a GET whose answer was lost: %d sends (%v), want it retried", g.passed.Load(), err)
		}
	})
}

// TestRetriesAreAnnouncedAtOnce: a coordinator not running (or
// --coordinator pointing where nothing listens) kept `capgate admin` and
// `capgate produce` silent for the whole retry budget (15 s) before the
// error said what was wrong (newuser14's walk). Now the first retry
// says, on stderr, what went wrong and that it is retrying for how long
// — once per request — and the final error is as before.
func TestRetriesAreAnnouncedAtOnce(t *testing.T) {
	nowhere := coordinatorstest.Down(t) // refused, and the port stays this test's
	for name, args := range map[string][]string{
		"admin":   {"admin", "groups", "--coordinator", nowhere, "--token", "x"},
		"produce": {"produce", "-t", "demo", "-p", "0", "--coordinator", nowhere, "--token", "x", "--gateways", "http://127.0.0.1:1"},
	} {
		t.Run(name, func(t *testing.T) {
			shortRetry(t, 300*time.Millisecond)
			out, err := run(t, args...)
			if err == nil || !strings.Contains(err.Error(), "no coordinator replica could be reached after") {
				t.Fatalf("error %v, want the retries' summary", err)
			}
			if n := strings.Count(out, "retrying for up to 300ms"); n != 1 || !strings.Contains(out, "nothing listens at "+strings.TrimPrefix(nowhere, "http://")) {
				t.Fatalf("stderr announced %d retries, want 1 saying nothing listens there:\n%s", n, out)
			}
		})
	}
}
