package coordinator_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// forwarding adds X-Forwarded-For lines (one per value, in order) to
// every request: what a proxy relays.
type forwarding struct {
	base      http.RoundTripper
	forwarded []string
}

func (f forwarding) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for _, v := range f.forwarded {
		r.Header.Add("X-Forwarded-For", v)
	}
	return f.base.RoundTrip(r)
}

// via is h with its requests coming from the loopback address ip (the
// proxy, or a client that talks directly) carrying forwarded as
// X-Forwarded-For.
func (h *harness) via(ip string, forwarded ...string) *harness {
	return &harness{env: h.env, c: h.c, base: h.base, client: h.clientVia(ip, forwarded...)}
}

func (h *harness) clientVia(ip string, forwarded ...string) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: forwarding{h.transportFrom(ip), forwarded}}
}

// proxyEnv is an env whose trusted proxy is 127.0.0.2 (and a network
// of further proxies, 10.0.0.0/8), with budgets of burst failures that
// do not refill during a test.
func proxyEnv(t *testing.T, burst int, trusted ...string) *env {
	e := newEnv(t, map[string]int32{"orders": 1})
	e.cfg.TrustedProxies = trusted
	e.cfg.AuthFailuresPerSecond, e.cfg.AuthFailureBurst = 0.01, burst
	e.cfg.OAuth.MaxFailures, e.cfg.OAuth.FailureWindow = burst, time.Hour
	e.cfg.Console.LoginMaxFailures, e.cfg.Console.LoginFailureWindow = burst, time.Hour
	return e
}

// TestForgedTokensBudgetedPerForwardedClient: every client comes through
// one proxy (127.0.0.2, trusted_proxies), as behind a Kubernetes
// ingress. Client A spends its forged-token budget at heartbeat; A's
// fresh credential is then 429 at join — also when another trusted hop
// stands between (the walk skips it) — while client B, through the very
// same proxy, joins with its fresh credential and heartbeats. Before
// trusted_proxies, A spent the budget of everyone behind the proxy.
func TestForgedTokensBudgetedPerForwardedClient(t *testing.T) {
	const burst = 3
	h := proxyEnv(t, burst, "127.0.0.2/32", "10.0.0.0/8").start(t)
	creds := h.clientCredential(t, []string{"g"}, []string{"orders"})
	m := h.join(t, "g", creds, api.JoinRequest{Topics: []string{"orders"}})
	a := h.via("127.0.0.2", "198.51.100.7")
	for i := range burst {
		a.expectError(t, "POST", "/v1/groups/g/heartbeat", forgedSignature(m.token, i), api.HeartbeatRequest{}, 401, api.CodeUnauthorized)
	}
	a.expectError(t, "POST", "/v1/groups/g/heartbeat", forgedSignature(m.token, burst), api.HeartbeatRequest{}, 429, api.CodeRateLimited)
	join := api.JoinRequest{Topics: []string{"orders"}}
	h.via("127.0.0.2", "198.51.100.7", "10.1.2.3").expectError(t, "POST", "/v1/groups/g/join", h.clientCredential(t, []string{"g"}, []string{"orders"}), join, 429, api.CodeRateLimited)
	b := h.via("127.0.0.2", "203.0.113.5, 198.51.100.8")
	b.join(t, "g", h.clientCredential(t, []string{"g"}, []string{"orders"}), join).heartbeat(t, 1)
	if n := h.metric(t, "capgate_coordinator_auth_failure_addresses"); n != 1 {
		t.Fatalf("%v client addresses tracked, want 1 (A's)", n)
	}
}

// TestOAuthAndConsoleFailuresPerForwardedClient: the token endpoint's
// and the console login's failure budgets key on the forwarded client
// too, and their warnings name it, not the proxy. A's wrong secrets and
// wrong logins through the proxy are 401 up to the budget, then 429;
// B's, through the same proxy, are 401 (its own budget) and B's right
// admin token logs in.
func TestOAuthAndConsoleFailuresPerForwardedClient(t *testing.T) {
	const burst = 2
	e := proxyEnv(t, burst, "127.0.0.2/32")
	h := e.start(t)
	victim := createOAuthClient(t, h, "victim", []string{"g"})
	a, b := h.clientVia("127.0.0.2", "198.51.100.7"), h.clientVia("127.0.0.2", "198.51.100.8")
	for i := range burst + 1 {
		if status, _ := guess(t, h, a, victim.ClientID); (i < burst && status != 401) || (i == burst && status != 429) {
			t.Fatalf("A's wrong secret %d: %d", i+1, status)
		}
	}
	if status, _ := guess(t, h, b, victim.ClientID); status != 401 {
		t.Fatalf("B's wrong secret through the same proxy: %d, want 401 (its own budget)", status)
	}
	consoleA, consoleB := newConsoleClient(t, h), newConsoleClient(t, h)
	consoleA.client.Transport, consoleB.client.Transport = a.Transport, b.Transport
	for i := range burst + 1 {
		if got := consoleA.login("guess-"+strconv.Itoa(i), nil); (i < burst && got.status != 401) || (i == burst && got.status != 429) {
			t.Fatalf("A's wrong login %d: %d", i+1, got.status)
		}
	}
	if got := consoleB.login(e.adminToken, nil); got.status != 303 {
		t.Fatalf("B's admin login through the same proxy: %d %s, want 303", got.status, got.body)
	}
	for message, key := range map[string]string{"oauth client refused": "address", "console login rate limited": "address"} {
		named := e.logs.FilterMessageSnippet(message).FilterField(zapcore.Field{Key: key, Type: zapcore.StringType, String: "198.51.100.7"})
		if named.Len() == 0 {
			t.Fatalf("no %q warning naming client A: %v", message, e.logs.FilterMessageSnippet(message).All())
		}
	}
	e.checkLogs(t)
}

// TestForwardedForIgnoredFromUntrustedPeers is the attack on the
// setting: a client talking to the coordinator directly sends a fresh
// X-Forwarded-For with every forged member token and every wrong OAuth
// secret, hoping each counts against a new address. From a peer outside
// trusted_proxies — none configured (the default), or other networks —
// the header is never read: past the budget it is 429, whatever the
// header names.
func TestForwardedForIgnoredFromUntrustedPeers(t *testing.T) {
	for _, trusted := range [][]string{nil, {"10.0.0.0/8", "fd00::/8"}} {
		t.Run(strconv.Itoa(len(trusted))+" trusted networks", func(t *testing.T) {
			const burst = 3
			h := proxyEnv(t, burst, trusted...).start(t)
			creds := h.clientCredential(t, []string{"g"}, []string{"orders"})
			m := h.join(t, "g", creds, api.JoinRequest{Topics: []string{"orders"}})
			spoof := func(i int) *harness { return h.via("127.0.0.3", "198.51.100."+strconv.Itoa(i+1)) }
			for i := range burst {
				spoof(i).expectError(t, "POST", "/v1/groups/g/heartbeat", forgedSignature(m.token, i), api.HeartbeatRequest{}, 401, api.CodeUnauthorized)
			}
			spoof(burst).expectError(t, "POST", "/v1/groups/g/heartbeat", forgedSignature(m.token, burst), api.HeartbeatRequest{}, 429, api.CodeRateLimited)
			h.via("127.0.0.3", "10.0.0.1, 203.0.113.99").expectError(t, "POST", "/v1/groups/g/join",
				h.clientCredential(t, []string{"g"}, []string{"orders"}), api.JoinRequest{Topics: []string{"orders"}}, 429, api.CodeRateLimited)
			victim := createOAuthClient(t, h, "victim", []string{"g"})
			for i := range burst + 1 {
				status, _ := guess(t, h, h.clientVia("127.0.0.4", "198.51.100."+strconv.Itoa(i+1)), victim.ClientID)
				if (i < burst && status != 401) || (i == burst && status != 429) {
					t.Fatalf("wrong secret %d with a fresh X-Forwarded-For: %d", i+1, status)
				}
			}
		})
	}
}

// TestForwardedGarbageKeyedAsTheProxy: a trusted proxy relays an
// X-Forwarded-For hop that is not an IP address. It is never believed:
// the walk stops there and the request counts against the last trusted
// hop, here the proxy itself. Forgeries with a different garbage hop
// each spend the proxy's one budget; a garbage hop right of a real
// client hides it (the proxy's spent budget: 429); a client right of the
// garbage is keyed as itself and joins.
func TestForwardedGarbageKeyedAsTheProxy(t *testing.T) {
	const burst = 3
	h := proxyEnv(t, burst, "127.0.0.2/32").start(t)
	creds := h.clientCredential(t, []string{"g"}, []string{"orders"})
	m := h.join(t, "g", creds, api.JoinRequest{Topics: []string{"orders"}})
	for i := range burst {
		h.via("127.0.0.2", "garbage-"+strconv.Itoa(i)).expectError(t, "POST", "/v1/groups/g/heartbeat", forgedSignature(m.token, i), api.HeartbeatRequest{}, 401, api.CodeUnauthorized)
	}
	join := api.JoinRequest{Topics: []string{"orders"}}
	for _, forwarded := range [][]string{nil, {"198.51.100.8, unknown"}, {"198.51.100.8:4711"}, {"198.51.100.8", ""}} {
		h.via("127.0.0.2", forwarded...).expectError(t, "POST", "/v1/groups/g/join", h.clientCredential(t, []string{"g"}, []string{"orders"}), join, 429, api.CodeRateLimited)
	}
	h.via("127.0.0.2", "junk, 198.51.100.8").join(t, "g", h.clientCredential(t, []string{"g"}, []string{"orders"}), join)
}

// TestTrustedProxiesConfigErrorsNameTheKey: a bad trusted_proxies entry
// fails validation naming trusted_proxies[i] (the process adds
// "coordinator:").
func TestTrustedProxiesConfigErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct {
		proxies []string
		want    string
	}{
		{[]string{"fd00::/8", "fd00::1/8"}, `trusted_proxies[1]: "fd00::1/8" has address bits set past /8: write the network fd00::/8, or the host fd00::1/128`},
		{[]string{"::/0"}, `trusted_proxies[0]: "::/0" trusts every peer`},
		{[]string{"::ffff:10.0.0.0/104"}, `trusted_proxies[0]: write an IPv4 network as IPv4`},
		{[]string{"10.0.0.0/8 "}, `trusted_proxies[0]: must be a CIDR`},
	} {
		cfg := coordinator.DefaultConfig()
		cfg.TrustedProxies = tc.proxies
		if err := cfg.Validate(); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.proxies, err, tc.want)
		}
	}
}
