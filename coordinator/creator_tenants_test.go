package coordinator_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/identity"
	"github.com/capgate/capgate/identity/idptest"
)

// creatorEnv is the env of the created-groups tests over HTTP:
// groups_per_credential 2, at most groups groups, empty groups forgotten
// after 11 min and groups holding offsets after 22, joins unthrottled,
// and a clock the test moves (start with clock.option()).
func creatorEnv(t *testing.T, groups int) (*env, *movedClock) {
	e := newEnv(t, map[string]int32{"orders": 1})
	l := &e.cfg.Groups.Limits
	l.GroupsPerCredential, l.Groups = 2, groups
	l.EmptyGroupTTL, l.OffsetsRetention = 11*time.Minute, 22*time.Minute
	e.cfg.JoinRate, e.cfg.JoinBurst = 1000, 1000
	clock := &movedClock{}
	clock.ns.Store(time.Now().UnixNano())
	return e, clock
}

// movedClock is a coordinator's clock that only the test moves.
type movedClock struct{ ns atomic.Int64 }

func (c *movedClock) now() time.Time             { return time.Unix(0, c.ns.Load()) }
func (c *movedClock) add(d time.Duration)        { c.ns.Add(int64(d)) }
func (c *movedClock) option() coordinator.Option { return coordinator.WithClock(c.now) }

// oauthToken is a credential the OAuth client o obtains from /oauth/token.
func (h *harness) oauthToken(t *testing.T, o coordinator.OAuthClientCreated) string {
	t.Helper()
	status, body, _ := tokenRequest(t, h, clientCredentialsForm(), []string{o.ClientID, o.ClientSecret})
	if status != 200 {
		t.Fatalf("token: %d %v", status, body)
	}
	tok := body["access_token"].(string)
	h.env.remember(tok)
	return tok
}

// refusedCreating asserts a join was refused because its tenant created
// groups_per_credential (2) groups that still exist, naming the tenant.
func refusedCreating(t *testing.T, status int, body []byte, tenant string) {
	t.Helper()
	d := errorDetails(t, body)
	if status != 409 || errorCode(t, body) != api.CodeLimitExceeded || d["limit"] != "coordinator.groups.limits.groups_per_credential" ||
		d["counted"] != "groups_created" || d["tenant"] != tenant || !strings.Contains(string(body), "created 2 groups that still exist") {
		t.Fatalf("join past the groups %s created: %d %s", tenant, status, body)
	}
}

// The attack with an OAuth client: it may hold oauth.live_tokens_max
// credentials at once, and the groups a join creates were counted per
// credential, so with groups_per_credential 2 one client's three tokens
// created six groups. They count for the client now: its 3rd group is
// refused whichever token asks, across a restart; another client still
// creates; describe names the creator; the refusals and the reaping are
// counted in /metrics; once offsets_retention forgot the client's groups
// (the one with an offset too), it creates again.
func TestOAuthClientCreatesGroupsAsOneTenant(t *testing.T) {
	e, clock := creatorEnv(t, 20)
	h := e.start(t, clock.option())
	a, b := createOAuthClient(t, h, "a", []string{"*"}), createOAuthClient(t, h, "b", []string{"*"})
	tenantA := "oauth:" + a.ClientID
	tokens := []string{h.oauthToken(t, a), h.oauthToken(t, a), h.oauthToken(t, a)}
	req := api.JoinRequest{Topics: []string{"orders"}}

	m := h.join(t, "a-0", tokens[0], req)
	if status, body := m.commit(t, "orders", 0, 0, false); status != 200 {
		t.Fatalf("commit in a-0: %d %s", status, body)
	}
	h.call(t, "POST", "/v1/groups/a-0/leave", m.token, api.LeaveRequest{}, 200, nil)
	m = h.join(t, "a-1", tokens[0], req)
	h.call(t, "POST", "/v1/groups/a-1/leave", m.token, api.LeaveRequest{}, 200, nil)
	created := 2
	type answer struct {
		status int
		body   []byte
	}
	var refused []answer
	for i, tok := range tokens {
		for j := range 2 {
			name := "a-" + string(rune('2'+2*i+j))
			status, body, _ := h.do(t, "POST", "/v1/groups/"+name+"/join", tok, req)
			if status == 200 {
				created++
				continue
			}
			refused = append(refused, answer{status, body})
		}
	}
	if created != 2 {
		t.Fatalf("one OAuth client's 3 tokens created %d groups, want groups_per_credential (2)", created)
	}
	for _, r := range refused {
		refusedCreating(t, r.status, r.body, tenantA)
	}
	if got := h.metric(t, `capgate_coordinator_join_limit_refusals_total{limit="groups_created"}`); got != 6 {
		t.Fatalf("join_limit_refusals_total{groups_created} = %v, want 6", got)
	}
	h.join(t, "b-0", h.oauthToken(t, b), req)
	if d := h.describe(t, "a-0"); d.Creator != tenantA {
		t.Fatalf("a-0's creator %q, want %q", d.Creator, tenantA)
	}

	h.stop(t)
	h = e.start(t, clock.option())
	status, body, _ := h.do(t, "POST", "/v1/groups/a-8/join", tokens[2], req)
	refusedCreating(t, status, body, tenantA)

	for range 12 { // past offsets_retention: any request steps the machine's timers
		clock.add(3 * time.Minute)
		h.join(t, "b-live", h.oauthToken(t, b), api.JoinRequest{Topics: []string{"orders"}, SessionTimeoutMs: 300_000})
	}
	for name, want := range map[string]float64{
		`capgate_coordinator_groups_reaped_total{reason="offsets_retention"}`: 1, // a-0
		`capgate_coordinator_groups_reaped_total{reason="empty_group_ttl"}`:   2, // a-1, b-0
		`capgate_coordinator_offsets_expired_total`:                           1,
	} {
		if got := h.metric(t, name); got != want {
			t.Fatalf("%s = %v, want %v", name, got, want)
		}
	}
	h.join(t, "a-8", h.oauthToken(t, a), req)
	h.join(t, "a-9", tokens[2], req)
}

// An IdP subject gets a fresh token every few minutes (each with its own
// jti), but is one tenant: its identity id (issuer and subject), the id
// an admin denies. Fresh tokens of one subject, each leaving at once (so
// only the groups it created hold it back), create groups_per_credential
// groups between them; another subject of the same issuer still creates.
func TestIdPIdentityCreatesGroupsAsOneTenant(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	idp := idptest.New(t, "RS256")
	e.cfg.OIDC.Issuers = []identity.IssuerConfig{{
		Issuer: idp.URL, CAFile: idp.CAFile, Audiences: []string{"capgate"},
		Rules: []identity.Rule{{Claim: "groups", Value: "kafka", Groups: []string{"idp-*"}, Topics: []string{"orders"}}},
	}}
	e.cfg.Groups.Limits.GroupsPerCredential = 2
	e.cfg.JoinRate, e.cfg.JoinBurst = 1000, 1000
	h := e.start(t)
	issued := 0
	fresh := func(sub string) string { // a new token, as an IdP refresh hands out
		issued++
		now := time.Now()
		tok := idp.Token(idptest.Claims{"sub": sub, "aud": "capgate", "jti": "tok-" + string(rune('a'+issued)),
			"iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(), "groups": []string{"kafka"}})
		e.remember(tok)
		return tok
	}
	req := api.JoinRequest{Topics: []string{"orders"}}
	for _, name := range []string{"idp-0", "idp-1"} { // left at once: only the groups created count
		m := h.join(t, name, fresh("svc-7"), req)
		h.call(t, "POST", "/v1/groups/"+name+"/leave", m.token, api.LeaveRequest{}, 200, nil)
	}
	tenant := identity.IdentityID(idp.URL, "svc-7")
	for _, name := range []string{"idp-2", "idp-3"} {
		status, body, _ := h.do(t, "POST", "/v1/groups/"+name+"/join", fresh("svc-7"), req)
		refusedCreating(t, status, body, tenant)
	}
	h.join(t, "idp-2", fresh("svc-8"), req)
	if d := h.describe(t, "idp-1"); d.Creator != tenant {
		t.Fatalf("idp-1's creator %q, want the identity id %q", d.Creator, tenant)
	}
}
