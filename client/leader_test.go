package client

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client/driver"
	"github.com/capgate/capgate/internal/coordinators/coordinatorstest"
)

// echo is the leader: it answers 200 with the request's path and body.
func echo(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		b, _ := io.ReadAll(r.Body)
		_, _ = io.WriteString(w, r.URL.Path+" "+string(b)+" "+r.Header.Get("Authorization"))
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

func post(t *testing.T, hc *http.Client, url, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer member-token")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestLeaderTransportFollowsHint: a call to a standby reaches the leader
// it names within the call (body and bearer re-sent), header or body hint
// alike, and later calls go straight to the leader.
func TestLeaderTransportFollowsHint(t *testing.T) {
	for _, inHeader := range []bool{true, false} {
		leader, led := echo(t)
		standby, asked := coordinatorstest.Standby(t, leader.URL, inHeader)
		hc, err := WithCoordinators(http.DefaultClient, []string{standby.URL, leader.URL})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			status, got := post(t, hc, standby.URL+"/v1/groups/g/commit", `{"n":1}`)
			if status != 200 || got != `/v1/groups/g/commit {"n":1} Bearer member-token` {
				t.Fatalf("call %d: %d %q", i, status, got)
			}
		}
		if asked.Load() != 1 || led.Load() != 3 {
			t.Fatalf("header %t: standby asked %d times, leader %d; want 1 and 3", inHeader, asked.Load(), led.Load())
		}
	}
}

// TestLeaderTransportRefusesUnlistedHint: a hint outside the list is not
// followed (the member token must not go there): the 421 comes back, and
// the next call tries the next listed URL.
func TestLeaderTransportRefusesUnlistedHint(t *testing.T) {
	lure, lured := echo(t)
	leader, led := echo(t)
	standby, _ := coordinatorstest.Standby(t, lure.URL, true)
	hc, err := WithCoordinators(http.DefaultClient, []string{standby.URL, leader.URL})
	if err != nil {
		t.Fatal(err)
	}
	if status, _ := post(t, hc, standby.URL+"/v1/x", ""); status != 200 {
		t.Fatalf("status %d, want the next listed URL's 200", status)
	}
	if lured.Load() != 0 || led.Load() != 1 {
		t.Fatalf("lure %d, leader %d: want 0 and 1", lured.Load(), led.Load())
	}
}

// TestLeaderTransportSkipsUnreachable: a replica that refuses the
// connection is skipped within the call (nothing was sent), and later
// calls go to the next URL directly; gateway URLs pass through untouched.
func TestLeaderTransportSkipsUnreachable(t *testing.T) {
	dead := coordinatorstest.Down(t)
	leader, led := echo(t)
	other, othered := echo(t)
	hc, err := WithCoordinators(http.DefaultClient, []string{dead, leader.URL})
	if err != nil {
		t.Fatal(err)
	}
	if status, got := post(t, hc, dead+"/v1/x", "once"); status != 200 || led.Load() != 1 {
		t.Fatalf("first call with the dead replica listed first: %d %q, leader asked %d times", status, got, led.Load())
	}
	if status, _ := post(t, hc, dead+"/v1/x", ""); status != 200 || led.Load() != 2 {
		t.Fatalf("second call: %d, leader asked %d times", status, led.Load())
	}
	if status, _ := post(t, hc, other.URL+"/v1/topics/t", ""); status != 200 || othered.Load() != 1 || led.Load() != 2 {
		t.Fatalf("a gateway URL was rerouted: %d", status)
	}
}

// TestConsumerFollowsNotLeader: a consumer configured with a standby
// first joins, heartbeats and consumes through the leader it names; the
// standby is asked once.
func TestConsumerFollowsNotLeader(t *testing.T) {
	var e *env
	e = newEnv(t, func(int) []api.Grant { return []api.Grant{e.grantOf(p0, 3, 0, "cap-p0")} })
	e.store.append(p0, 5)
	standby, asked := coordinatorstest.Standby(t, e.coord.srv.URL, true)
	cfg := e.config()
	cfg.CoordinatorURL, cfg.CoordinatorURLs = standby.URL, []string{e.coord.srv.URL}
	c := e.start(cfg)
	rs := pollUntil(t, c, func(rs []Record) bool { return len(rs) >= 5 })
	checkSequence(t, rs, p0, 0, 5)
	if n := asked.Load(); n != 1 {
		t.Fatalf("the standby was asked %d times, want once", n)
	}
}

func TestConfigCoordinatorURLs(t *testing.T) {
	e := newEnv(t, nil)
	cfg := e.config()
	cfg.CoordinatorURLs = []string{"http://b:7070", "ftp://c"}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "client.coordinator_urls") {
		t.Fatalf("Validate: %v", err)
	}
	cfg.CoordinatorURLs = []string{strings.TrimRight(cfg.CoordinatorURL, "/")}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "listed twice") {
		t.Fatalf("Validate of a duplicate: %v", err)
	}
}

// TestLeaderTransportHedgeMovesOn: a hedged commit attempt
// (driver.Send.Hedge: an earlier one is held silent by the replica in
// use) starts at the next replica, as an attempt after a failed one
// does; a leader that is only slow is reached again through the
// standby's not_leader, one round trip more. Calls without the mark stay
// where they are.
func TestLeaderTransportHedgeMovesOn(t *testing.T) {
	leader, led := echo(t)
	standby, asked := coordinatorstest.Standby(t, leader.URL, true)
	hc, err := WithCoordinators(http.DefaultClient, []string{leader.URL, standby.URL})
	if err != nil {
		t.Fatal(err)
	}
	hedged := func(hedge bool) {
		t.Helper()
		ctx := movingOn(t.Context(), driver.Send{Hedge: hedge})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, leader.URL+"/v1/groups/g/commit", strings.NewReader(`{}`))
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("hedge %t: %d", hedge, resp.StatusCode)
		}
	}
	hedged(false)
	if asked.Load() != 0 || led.Load() != 1 {
		t.Fatalf("a plain call: standby asked %d times, leader %d; want 0 and 1", asked.Load(), led.Load())
	}
	hedged(true)
	if asked.Load() != 1 || led.Load() != 2 {
		t.Fatalf("a hedge: standby asked %d times, leader %d; want 1 and 2 (moved on, then followed the hint)", asked.Load(), led.Load())
	}
	hedged(false)
	if asked.Load() != 1 || led.Load() != 3 {
		t.Fatalf("after the hedge: standby asked %d times, leader %d; want the leader in use again", asked.Load(), led.Load())
	}
}
