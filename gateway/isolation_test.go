package gateway

import (
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/ocap"
)

// abandonPolls opens n connections, sends on each a long poll of
// orders/p at offset with max_wait_ms=wait, and closes each connection
// after hold without reading the answer: the clients are gone.
func (h *harness) abandonPolls(token string, p int32, offset int64, wait time.Duration, n int, hold time.Duration) {
	h.t.Helper()
	raw := fmt.Sprintf("GET %s HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer %s\r\n\r\n",
		recordsPath(p, fmt.Sprintf("offset=%d&max_wait_ms=%d", offset, wait.Milliseconds())), token)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := net.Dial("tcp", h.gw.Addr())
			if err != nil {
				h.t.Error(err)
				return
			}
			defer conn.Close()
			if _, err := conn.Write([]byte(raw)); err != nil {
				h.t.Error(err)
				return
			}
			time.Sleep(hold)
		}()
	}
	wg.Wait()
}

// TestAbandonedLongPollsDoNotStallOthers is the attack of issue #10
// (defect 2): one holder opens 48 long polls of 8 s and 128 of 3 s on an
// idle partition and abandons them at once; another holder's 1-record
// fetches of another partition must not wait for any of them. Before the
// fix they waited for a broker connection slot (32 per broker, held by the
// abandoned polls until their max_wait ran out): 3-15 s. The bound here,
// 1.5 s, is half the shortest abandoned poll: a fetch under it did not
// wait for one to end.
func TestAbandonedLongPollsDoNotStallOthers(t *testing.T) {
	h := newHarness(t, nil)
	h.produce(0, 20)
	attacker, _ := h.mint(withHolder(capClaims(1), "attacker"))
	victim, _ := h.mint(capClaims(0))
	if r := h.get(victim, recordsPath(0, "offset=0&max_bytes=1")); r.status != http.StatusOK {
		t.Fatalf("victim's first fetch: %d %s", r.status, r.body)
	}

	var attack sync.WaitGroup
	attack.Add(2)
	go func() { defer attack.Done(); h.abandonPolls(attacker, 1, 0, 8*time.Second, 48, 100*time.Millisecond) }()
	go func() { defer attack.Done(); h.abandonPolls(attacker, 1, 0, 3*time.Second, 128, 100*time.Millisecond) }()
	attack.Wait()

	const bound = 1500 * time.Millisecond
	var worst time.Duration
	for i := range 20 {
		start := time.Now()
		r := h.get(victim, recordsPath(0, fmt.Sprintf("offset=%d&max_bytes=1", i)))
		took := time.Since(start)
		if r.status != http.StatusOK || len(r.fetch(t).Records) == 0 {
			t.Fatalf("victim's fetch %d: %d %s", i, r.status, r.body)
		}
		worst = max(worst, took)
	}
	t.Logf("victim's slowest fetch during the attack: %v", worst)
	if worst > bound {
		t.Fatalf("the victim's fetch took %v while another holder's abandoned polls were pending (bound %v)", worst, bound)
	}
}

// TestAbandonedLongPollReleasesAtOnce: a long poll whose client went away
// is cancelled and unregistered long before its max_wait (8 s) runs out.
func TestAbandonedLongPollReleasesAtOnce(t *testing.T) {
	h := newHarness(t, nil)
	tok, _ := h.mint(capClaims(1))
	h.abandonPolls(tok, 1, 0, 8*time.Second, 4, 200*time.Millisecond)
	start := time.Now()
	waitFor(t, "the abandoned polls to end", func() bool { return h.gw.inflight.count() == 0 })
	if took := time.Since(start); took > 4*time.Second {
		t.Fatalf("abandoned long polls ended only after %v (max_wait 8s)", took)
	}
	var m dto.Metric
	if err := h.gw.metrics.abandoned.Write(&m); err != nil {
		t.Fatal(err)
	}
	if n := m.GetCounter().GetValue(); n != 4 {
		t.Fatalf("%v long polls counted as abandoned, want 4", n)
	}
}

// withHolder names another subject in c.
func withHolder(c ocap.Claims, subject string) ocap.Claims {
	c.Subject = subject
	return c
}

// holdPolls opens n long polls of orders/p (max_wait 10 s) with token on
// their own connections and keeps them open until release is called.
func (h *harness) holdPolls(token string, p int32, n int) (release func()) {
	h.t.Helper()
	raw := fmt.Sprintf("GET %s HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer %s\r\n\r\n", recordsPath(p, "offset=0&max_wait_ms=10000"), token)
	var conns []net.Conn
	for range n {
		conn, err := net.Dial("tcp", h.gw.Addr())
		if err != nil {
			h.t.Fatal(err)
		}
		if _, err := conn.Write([]byte(raw)); err != nil {
			h.t.Fatal(err)
		}
		conns = append(conns, conn)
	}
	return func() {
		for _, c := range conns {
			c.Close()
		}
	}
}

// TestInflightCapPerHolder: a holder with max_inflight_fetches_per_holder
// fetches in flight gets 429 too_many_fetches (JSON, Retry-After), and so
// does an attenuated child of it (they share the chain's root); another
// holder is served; once the polls end the holder is served again.
func TestInflightCapPerHolder(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxInflightFetchesPerHolder = 2 })
	h.produce(0, 1)
	holder, parent := h.mint(capClaims(1))
	childClaims := capClaims(1)
	childClaims.Chain = []string{parent.ID}
	child, _ := h.mint(childClaims)
	other, _ := h.mint(withHolder(capClaims(0), "member-2"))

	release := h.holdPolls(holder, 1, 2)
	waitFor(t, "two polls in flight", func() bool { return h.gw.inflight.count() == 2 })
	for _, tok := range []string{holder, child} {
		r := h.get(tok, recordsPath(1, "offset=0"))
		expectError(t, r, http.StatusTooManyRequests, api.CodeTooManyFetches)
		if r.header.Get("Retry-After") == "" {
			t.Fatalf("429 without Retry-After: %v", r.header)
		}
	}
	if r := h.get(other, recordsPath(0, "offset=0")); r.status != http.StatusOK {
		t.Fatalf("another holder: %d %s", r.status, r.body)
	}
	release()
	waitFor(t, "the polls to end", func() bool { return h.gw.inflight.count() == 0 })
	if r := h.get(child, recordsPath(1, "offset=0")); r.status != http.StatusOK {
		t.Fatalf("the child once its root's polls ended: %d %s", r.status, r.body)
	}
}

// TestInflightCapPerGateway: with max_inflight_fetches in flight, any
// holder's fetch gets 503 overloaded (JSON, Retry-After): try another
// gateway.
func TestInflightCapPerGateway(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxInflightFetches = 2 })
	a, _ := h.mint(capClaims(1))
	b, _ := h.mint(withHolder(capClaims(2), "member-2"))
	c, _ := h.mint(withHolder(capClaims(0), "member-3"))
	releaseA, releaseB := h.holdPolls(a, 1, 1), h.holdPolls(b, 2, 1)
	defer releaseB()
	waitFor(t, "two polls in flight", func() bool { return h.gw.inflight.count() == 2 })
	r := h.get(c, recordsPath(0, "offset=0"))
	expectError(t, r, http.StatusServiceUnavailable, api.CodeOverloaded)
	if r.header.Get("Retry-After") == "" {
		t.Fatalf("503 without Retry-After: %v", r.header)
	}
	releaseA()
	waitFor(t, "one poll to end", func() bool { return h.gw.inflight.count() == 1 })
	if r := h.get(c, recordsPath(0, "offset=0")); r.status != http.StatusOK {
		t.Fatalf("with room again: %d %s", r.status, r.body)
	}
}
