package gateway

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
)

// getVia is getFrom with one X-Forwarded-For line per value of forwarded,
// in order (none for no value): what a proxy at cl's address relays.
func (h *harness) getVia(cl *http.Client, token, path string, forwarded ...string) response {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodGet, h.base+path, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	for _, v := range forwarded {
		req.Header.Add("X-Forwarded-For", v)
	}
	resp, err := cl.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{resp.StatusCode, resp.Header, b}
}

// spend sends burst forged capabilities through cl, each with the
// X-Forwarded-For of forwarded(i), and expects each refused 401: burst
// failures charged to whatever address they are keyed by.
func (h *harness) spend(cl *http.Client, valid string, burst int, forwarded func(i int) []string) {
	h.t.Helper()
	for i := range burst {
		expectError(h.t, h.getVia(cl, forged(valid, i), recordsPath(0, "offset=0"), forwarded(i)...), http.StatusUnauthorized, api.CodeUnauthorized)
	}
}

func fixed(values ...string) func(int) []string { return func(int) []string { return values } }

// TestForgedCapabilitiesBudgetedPerForwardedClient: every client comes
// through one proxy (127.0.0.2, gateway.trusted_proxies), as behind a
// Kubernetes ingress. Client A spends its forged-token budget; client
// B, another X-Forwarded-For address through the very same connection
// address, still has its fresh capability verified — before
// trusted_proxies one attacker spent the budget of everyone behind the
// proxy. A's fresh capability is refused 429, and so is one naming A
// behind another trusted hop (the walk skips it).
func TestForgedCapabilitiesBudgetedPerForwardedClient(t *testing.T) {
	const burst = 4
	h := newHarness(t, func(c *Config) {
		c.AuthFailuresPerSecond, c.AuthFailureBurst = 0.01, burst
		c.TrustedProxies = []string{"127.0.0.2/32", "10.0.0.0/8"}
	})
	h.produce(0, 1)
	proxy := clientFrom("127.0.0.2")
	valid, _ := h.mint(capClaims(0))
	path := recordsPath(0, "offset=0")
	h.spend(proxy, valid, burst, fixed("198.51.100.7"))
	expectError(t, h.getVia(proxy, forged(valid, burst), path, "198.51.100.7"), http.StatusTooManyRequests, api.CodeRateLimited)
	freshA, _ := h.mint(capClaims(0))
	expectError(t, h.getVia(proxy, freshA, path, "203.0.113.1, 198.51.100.7"), http.StatusTooManyRequests, api.CodeRateLimited)
	expectError(t, h.getVia(proxy, freshA, path, "198.51.100.7", "10.1.2.3"), http.StatusTooManyRequests, api.CodeRateLimited)
	freshB, _ := h.mint(capClaims(0))
	if r := h.getVia(proxy, freshB, path, "198.51.100.8"); r.status != http.StatusOK {
		t.Fatalf("client B's fresh capability through the same proxy: %d %s", r.status, r.body)
	}
	freshProxy, _ := h.mint(capClaims(0))
	if r := h.getVia(proxy, freshProxy, path); r.status != http.StatusOK {
		t.Fatalf("the proxy's own request (no X-Forwarded-For): %d %s", r.status, r.body)
	}
	if !strings.Contains(string(h.get("", "/metrics").body), "capgate_gateway_auth_failure_addresses 1\n") {
		t.Fatal("/metrics does not show the one client address tracked")
	}
}

// TestForwardedForIgnoredFromUntrustedPeers is the attack on the
// setting: a client that talks to the gateway directly sends a fresh
// X-Forwarded-For with every forged capability, hoping each is counted
// against a new address. X-Forwarded-For from a peer outside
// trusted_proxies is never read — with the setting empty (the default)
// and with it naming other networks — so its forgeries all count against
// its connection's address: past the burst it is refused 429, whatever
// the header says, while another address is not.
func TestForwardedForIgnoredFromUntrustedPeers(t *testing.T) {
	for _, trusted := range [][]string{nil, {"10.0.0.0/8", "fd00::/8"}} {
		t.Run(strconv.Itoa(len(trusted))+" trusted networks", func(t *testing.T) {
			const burst = 4
			h := newHarness(t, func(c *Config) {
				c.AuthFailuresPerSecond, c.AuthFailureBurst = 0.01, burst
				c.TrustedProxies = trusted
			})
			h.produce(0, 1)
			attacker := clientFrom("127.0.0.2")
			valid, _ := h.mint(capClaims(0))
			path := recordsPath(0, "offset=0")
			spoof := func(i int) []string { return []string{"198.51.100." + strconv.Itoa(i+1)} }
			h.spend(attacker, valid, burst, spoof)
			expectError(t, h.getVia(attacker, forged(valid, burst), path, spoof(burst)...), http.StatusTooManyRequests, api.CodeRateLimited)
			fresh, _ := h.mint(capClaims(0))
			expectError(t, h.getVia(attacker, fresh, path, "10.0.0.1, 203.0.113.99"), http.StatusTooManyRequests, api.CodeRateLimited)
			if r := h.getFrom(clientFrom("127.0.0.3"), fresh, path); r.status != http.StatusOK {
				t.Fatalf("another address's fresh capability: %d %s", r.status, r.body)
			}
		})
	}
}

// TestForwardedGarbageKeyedAsTheProxy: a trusted proxy relays an
// X-Forwarded-For hop that is not an IP address. It is never believed:
// the walk stops there and the request counts against the last trusted
// hop — here the proxy itself. Forgeries with a different garbage hop
// each spend the proxy's own budget (not one budget per garbage
// string); a garbage hop right of a real client hides it (the proxy's
// budget, spent: 429); a real client right of the garbage is that
// client's (verified).
func TestForwardedGarbageKeyedAsTheProxy(t *testing.T) {
	const burst = 4
	h := newHarness(t, func(c *Config) {
		c.AuthFailuresPerSecond, c.AuthFailureBurst = 0.01, burst
		c.TrustedProxies = []string{"127.0.0.2/32"}
	})
	h.produce(0, 1)
	proxy := clientFrom("127.0.0.2")
	valid, _ := h.mint(capClaims(0))
	path := recordsPath(0, "offset=0")
	h.spend(proxy, valid, burst, func(i int) []string { return []string{"garbage-" + strconv.Itoa(i)} })
	fresh, _ := h.mint(capClaims(0))
	expectError(t, h.getVia(proxy, fresh, path), http.StatusTooManyRequests, api.CodeRateLimited)
	expectError(t, h.getVia(proxy, fresh, path, "198.51.100.8, unknown"), http.StatusTooManyRequests, api.CodeRateLimited)
	expectError(t, h.getVia(proxy, fresh, path, "198.51.100.8:4711"), http.StatusTooManyRequests, api.CodeRateLimited)
	if r := h.getVia(proxy, fresh, path, "junk, 198.51.100.8"); r.status != http.StatusOK {
		t.Fatalf("a client right of the garbage: %d %s", r.status, r.body)
	}
}

// TestTrustedProxiesConfigErrorsNameTheKey: a bad trusted_proxies entry
// fails validation (and New) naming gateway.trusted_proxies[i].
func TestTrustedProxiesConfigErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct {
		proxies []string
		want    string
	}{
		{[]string{"10.0.0.0/8", "10.0.0.1/8"}, `gateway.trusted_proxies[1]: "10.0.0.1/8" has address bits set past /8: write the network 10.0.0.0/8, or the host 10.0.0.1/32`},
		{[]string{"0.0.0.0/0"}, `gateway.trusted_proxies[0]: "0.0.0.0/0" trusts every peer`},
		{[]string{"ingress.internal"}, `gateway.trusted_proxies[0]: must be a CIDR (10.0.0.0/8, fd00::/8) or an IP address, got "ingress.internal"`},
		{make([]string, 257), "gateway.trusted_proxies: at most 256 networks, got 257"},
	} {
		c := DefaultConfig()
		c.TrustedProxies = tc.proxies
		if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Validate: %v, want %q", err, tc.want)
		}
		c.SyncToken = "s"
		if _, err := New(c, nil); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("New: %v, want %q", err, tc.want)
		}
	}
	c := DefaultConfig()
	c.TrustedProxies = []string{"10.0.0.0/8", "fd00::/8", "192.0.2.7"}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestClientAddressReadOnlyOnACacheMiss: with trusted_proxies the client
// address costs a walk of the request's header block (about a
// microsecond and two allocations); a capability already verified never
// pays it — the address is read only when the budget is asked, on a
// cache miss. A hit allocates nothing.
func TestClientAddressReadOnlyOnACacheMiss(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.TrustedProxies = []string{"127.0.0.2/32"} })
	var req fasthttp.Request
	raw := "GET / HTTP/1.1\r\nHost: gw\r\nX-Forwarded-For: 198.51.100.1, 127.0.0.2\r\n\r\n"
	if err := req.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
		t.Fatal(err)
	}
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2), Port: 4711}, nil)
	if got := h.gw.callerAddr(caller{ctx: &ctx}); got.String() != "198.51.100.1" {
		t.Fatalf("the request's client: %s", got)
	}
	minted, _ := h.mint(capClaims(0))
	token := []byte(minted)
	if _, err := h.gw.verifyCapability(token, caller{ctx: &ctx}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(200, func() {
		if _, err := h.gw.verifyCapability(token, caller{ctx: &ctx}, time.Now()); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("a cache hit allocated %v times: the client address was read", n)
	}
}
