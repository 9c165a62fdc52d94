package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/ocap"
)

// TestInflightCapPerTenant is redteam3 #1, the attack as its test: one
// tenant (one client credential, tnt) holding many capabilities — one
// per join, each a holder of its own under max_inflight_fetches_per_holder
// — opens long polls on all of them to take every fetch of the gateway.
// With max_inflight_fetches 16, per holder 2 and the per-tenant default
// (a quarter: 4), only 4 of its 16 polls are admitted, the other 12 (and
// a fetch of a fresh capability of it) are 429 too_many_fetches naming
// max_inflight_fetches_per_tenant and its value, counted under
// capgate_gateway_inflight_refused_total{cap="tenant"}; another tenant's
// fetch is still served. Before, all 16 were admitted and every other
// tenant got 503 overloaded.
func TestInflightCapPerTenant(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxInflightFetches, c.MaxInflightFetchesPerHolder = 16, 2 })
	h.produce(0, 1)
	attacker := func(i int) string {
		c := withHolder(capClaims(int32(1+i%3)), fmt.Sprintf("c-%d-00000000000000%02d", i, i))
		c.Group, c.Tenant = fmt.Sprintf("fill-%d", i), "cred-attacker"
		tok, _ := h.mint(c)
		return tok
	}
	var releases []func()
	defer func() {
		for _, r := range releases {
			r()
		}
	}()
	for i := range 8 {
		releases = append(releases, h.holdPolls(attacker(i), int32(1+i%3), 2))
	}
	decided := func() int64 { return int64(h.gw.inflight.count()) + h.gw.inflight.refused[hitTenant].Load() }
	waitFor(t, "the attacker's 16 polls admitted or refused", func() bool {
		return decided() >= 16 || h.gw.inflight.count() >= 16
	})
	if n := h.gw.inflight.count(); n != 4 {
		t.Errorf("%d of one tenant's polls in flight, want max_inflight_fetches_per_tenant (4)", n)
	}

	victim := withHolder(capClaims(0), "victim-0000000000000001")
	victim.Group, victim.Tenant = "victim", "cred-victim"
	tok, _ := h.mint(victim)
	if r := h.get(tok, recordsPath(0, "offset=0")); r.status != http.StatusOK || len(r.fetch(t).Records) != 1 {
		t.Fatalf("another tenant's fetch while one tenant long-polls on many capabilities: %d %s", r.status, r.body)
	}

	r := h.get(attacker(9), recordsPath(1, "offset=0"))
	expectError(t, r, http.StatusTooManyRequests, api.CodeTooManyFetches)
	var body struct {
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal(r.body, &body); err != nil || body.Error["max_inflight_fetches_per_tenant"] != float64(4) || r.header.Get("Retry-After") == "" {
		t.Fatalf("tenant refusal: %s (Retry-After %q), want max_inflight_fetches_per_tenant 4", r.body, r.header.Get("Retry-After"))
	}
	if m := string(h.get("", "/metrics").body); !strings.Contains(m, `capgate_gateway_inflight_refused_total{cap="tenant"} 13`+"\n") {
		t.Fatalf("metrics do not count 13 tenant refusals:\n%s", grepLines(m, "inflight_refused"))
	}
}

// TestInflightCapPerTenantAttenuated: an attenuated child keeps its
// parent's tnt, so attenuating (which makes no new holder either) opens
// no second allowance; a capability without tnt (an admin grant) counts
// for its sub.
func TestInflightCapPerTenantAttenuated(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxInflightFetchesPerTenant = 1 })
	c := capClaims(1)
	c.Tenant = "cred-a"
	_, parent := h.mint(c)
	child, _, err := ocap.Attenuate(parent, ocap.Attenuation{Ops: ocap.Ops(ocap.OpFetch)}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	childTok, _ := h.mint(child)
	admin, _ := h.mint(withHolder(capClaims(2), "admin-holder"))
	release := h.holdPolls(childTok, 1, 1)
	defer release()
	waitFor(t, "the child's poll in flight", func() bool { return h.gw.inflight.count() == 1 })
	tok, _ := h.mint(withHolder(c, "member-9"))
	expectError(t, h.get(tok, recordsPath(1, "offset=0")), http.StatusTooManyRequests, api.CodeTooManyFetches)
	if r := h.get(admin, recordsPath(2, "offset=0")); r.status != http.StatusOK {
		t.Fatalf("a capability of another sub without tnt: %d %s", r.status, r.body)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestMaxInflightFetchesPerTenantValidated: the per-tenant cap is refused
// above max_inflight_fetches (it would bound nothing) and below 0, naming
// the setting and the total; 0 (the default) is a quarter of the total,
// at least 1.
func TestMaxInflightFetchesPerTenantValidated(t *testing.T) {
	for _, tc := range []struct {
		total, perTenant int
		want             string // "" valid
		effective        int
	}{
		{4096, 4097, "gateway.max_inflight_fetches_per_tenant: must be in [0, max_inflight_fetches (4096)] (0: a quarter of max_inflight_fetches), got 4097", 0},
		{100, -1, "gateway.max_inflight_fetches_per_tenant: must be in [0, max_inflight_fetches (100)] (0: a quarter of max_inflight_fetches), got -1", 0},
		{4096, 0, "", 1024},
		{4096, 4096, "", 4096},
		{2, 0, "", 1},
	} {
		c := DefaultConfig()
		c.MaxInflightFetches, c.MaxInflightFetchesPerTenant = tc.total, tc.perTenant
		err := c.Validate()
		switch {
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("total %d per tenant %d: err %v, want %q", tc.total, tc.perTenant, err, tc.want)
		case tc.want == "" && err != nil:
			t.Errorf("total %d per tenant %d: %v", tc.total, tc.perTenant, err)
		case tc.want == "" && c.inflightPerTenant() != tc.effective:
			t.Errorf("total %d per tenant %d: in effect %d, want %d", tc.total, tc.perTenant, c.inflightPerTenant(), tc.effective)
		}
	}
	if DefaultConfig().MaxInflightFetchesPerTenant != 0 {
		t.Fatal("the default is not 0 (a quarter of max_inflight_fetches)")
	}
}
