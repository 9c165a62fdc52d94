package gateway

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/internal/coordinators/coordinatorstest"
	"github.com/capgate/capgate/ocap"
)

// TestSyncFollowsNotLeader: listed first, a standby is asked once; the
// gateway follows its hint (header or body) at once, syncs with the
// leader, and keeps polling the leader (the hint is cached).
func TestSyncFollowsNotLeader(t *testing.T) {
	for _, inHeader := range []bool{true, false} {
		var calls *atomic.Int64
		h := newHarnessWith(t, harnessOptions{
			edit: func(c *Config) {
				var srv *httptest.Server
				srv, calls = coordinatorstest.Standby(t, c.CoordinatorURL, inHeader)
				c.CoordinatorURL = srv.URL + "," + c.CoordinatorURL
			},
		})
		h.waitReady()
		seq := h.sync.push(api.SyncResponse{})
		h.sync.waitAck(t, seq)
		if n := calls.Load(); n != 1 {
			t.Fatalf("header %t: the standby was asked %d times, want once", inHeader, n)
		}
		if got := h.gw.follower.LastGood(); got.IsZero() {
			t.Fatal("no good poll")
		}
	}
}

// TestSyncFollowingTheLeaderIsNotAWarning: a standby listed first is how
// a gateway finds the leader at every start of replicas; following its
// hint is logged at info, and nothing warns. It warned "sync failed …
// does not lead" at every `capgate dev --replicas` start.
func TestSyncFollowingTheLeaderIsNotAWarning(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	h := newHarnessWith(t, harnessOptions{
		log: zap.New(core),
		edit: func(c *Config) {
			srv, _ := coordinatorstest.Standby(t, c.CoordinatorURL, true)
			c.CoordinatorURL = srv.URL + "," + c.CoordinatorURL
		},
	})
	h.waitReady()
	if followed := logs.FilterMessage("sync: following the leading coordinator").All(); len(followed) != 1 || followed[0].Level != zapcore.InfoLevel {
		t.Fatalf("following the hint logged %+v, want one info line", followed)
	}
	if warned := logs.FilterLevelExact(zapcore.WarnLevel).All(); len(warned) != 0 {
		t.Fatalf("finding the leader warned: %+v", warned)
	}
}

// TestSyncSkipsUnreachableAndUnlistedHint: an unreachable URL and a
// standby naming a leader outside the list (where the sync token must
// never go) are skipped for the next listed URL.
func TestSyncSkipsUnreachableAndUnlistedHint(t *testing.T) {
	dead := coordinatorstest.Down(t)
	var lured atomic.Int64
	lure := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { lured.Add(1) }))
	t.Cleanup(lure.Close)
	h := newHarnessWith(t, harnessOptions{edit: func(c *Config) {
		srv, _ := coordinatorstest.Standby(t, lure.URL, true)
		c.CoordinatorURL = dead + "," + srv.URL + "," + c.CoordinatorURL
	}})
	h.waitReady()
	if lured.Load() != 0 {
		t.Fatal("the gateway followed a hint outside its coordinator list")
	}
}

// TestCloseLeavesAfterServing: Close tells the coordinator the gateway
// left, once it no longer accepts connections.
func TestCloseLeavesAfterServing(t *testing.T) {
	h := newHarness(t, nil)
	served := make(chan error, 1)
	addr := h.gw.Addr()
	h.sync.mu.Lock()
	h.sync.onLeave = func(string) {
		_, err := net.DialTimeout("tcp", addr, time.Second)
		served <- err
	}
	h.sync.mu.Unlock()
	if err := h.gw.Close(); err != nil {
		t.Fatal(err)
	}
	if got := h.sync.leaveLog(); len(got) != 1 || got[0] != "gw-test" {
		t.Fatalf("leaves %q, want [gw-test]", got)
	}
	if err := <-served; err == nil {
		t.Fatal("the gateway still accepted connections when it left")
	}
}

// TestLeaveMovesOnFromAFrozenLeader: the leader holds the gateway's
// leave without answering (frozen: SIGSTOP, its socket open); the
// attempt is given up after leaveAttemptMax, the standby's not_leader
// names the leader again, and the next attempt, answered, lands — within
// shutdown_timeout. Before, the first attempt held the whole
// shutdown_timeout, the gateway never left, and every handoff waited
// gateway_timeout for it (e2e/ha TestLeaderFailsDuringARollingGatewayRestart:
// the gateway was still running 10 s after its SIGTERM).
func TestLeaveMovesOnFromAFrozenLeader(t *testing.T) {
	h := newHarnessWith(t, harnessOptions{edit: func(c *Config) {
		srv, _ := coordinatorstest.Standby(t, c.CoordinatorURL, true)
		c.CoordinatorURL += "," + srv.URL
		c.ShutdownTimeout = 3 * leaveAttemptMax
	}})
	h.waitReady()
	h.sync.mu.Lock()
	h.sync.freezeLeaves = 1
	h.sync.mu.Unlock()
	start := time.Now()
	if err := h.gw.Close(); err != nil {
		t.Fatal(err)
	}
	if got := h.sync.leaveLog(); len(got) != 1 || got[0] != "gw-test" {
		t.Fatalf("leaves answered %q after %s, want [gw-test]", got, time.Since(start).Round(time.Millisecond))
	}
	t.Logf("left after %s", time.Since(start).Round(time.Millisecond))
}

// TestServeWhenCoordinatorLost: under the coordinator's silent_gateways:
// serve the gateway keeps serving unexpired capabilities past its
// sync_timeout with no coordinator answering (never out_of_sync), and
// still refuses expired ones.
func TestServeWhenCoordinatorLost(t *testing.T) {
	h := newHarnessWith(t, harnessOptions{
		edit:        func(c *Config) { c.SyncWait, c.SyncTimeout = 200*time.Millisecond, time.Second },
		beforeStart: func(h *harness) { h.sync.settings.SilentGateways = "serve" },
	})
	h.waitReady()
	tok, _ := h.mint(capClaims(0))
	h.sync.setFailing(true)
	waitFor(t, "sync_timeout to pass without a good poll", func() bool {
		return time.Since(h.gw.follower.LastGood()) > 2*time.Second
	})
	if r := h.get(tok, recordsPath(0, "offset=0")); r.status != http.StatusOK {
		t.Fatalf("fetch while cut off, serving: %d %s", r.status, r.body)
	}
	if r := h.get("", "/readyz"); r.status != http.StatusOK {
		t.Fatalf("readyz while cut off, serving: %d %s", r.status, r.body)
	}
	claims := capClaims(0)
	expired, _, err := h.minter.Mint(ocap.KindCapability, claims, time.Now().Add(-time.Minute), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	expectError(t, h.get(expired, recordsPath(0, "offset=0")), http.StatusUnauthorized, api.CodeTokenExpired)
}
