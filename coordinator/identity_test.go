package coordinator_test

import (
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/identity"
	"github.com/capgate/capgate/identity/idptest"
)

// TestJoinWithIdPTokens: a coordinator configured with an in-test OIDC
// issuer (discovery and JWKS over HTTPS, its own CA) lets the issuer's
// tokens join the groups its claim mapping grants, beside capgate's own
// credentials; the issuer rotates its key mid-test and the new tokens
// join; every bad token is refused with the code api/openapi.yaml
// documents for join; a denied identity is refused and its member
// revoked.
func TestJoinWithIdPTokens(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 2, "audit-log": 1})
	idp := idptest.New(t, "RS256")
	other := idptest.New(t, "RS256")
	e.cfg.OIDC.Issuers = []identity.IssuerConfig{{
		Issuer: idp.URL, CAFile: idp.CAFile, Audiences: []string{"capgate"},
		Rules: []identity.Rule{
			{Claim: "groups", Value: "kafka-billing", Groups: []string{"billing-*"}, Topics: []string{"orders"}},
			{Claim: "scope", Value: "capgate:audit", Groups: []string{"audit"}, Topics: []string{"*"}},
		},
	}}
	e.cfg.OIDC.JWKSRefreshMin = time.Millisecond // a rotated kid is fetched at once
	h := e.start(t)
	now := time.Now()
	claims := func(extra idptest.Claims) idptest.Claims {
		c := idptest.Claims{"sub": "svc-7", "aud": "capgate", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "groups": []string{"kafka-billing"}}
		for k, v := range extra {
			c[k] = v
		}
		return c
	}
	orders := api.JoinRequest{Topics: []string{"orders"}}
	token := idp.Token(claims(nil))
	e.remember(token)
	first := h.join(t, "billing-eu", token, orders)
	if d := h.describe(t, "billing-eu"); len(d.Members) != 1 {
		t.Fatalf("members %+v", d.Members)
	}
	h.join(t, "audit", idp.Token(claims(idptest.Claims{"groups": nil, "scope": "openid capgate:audit"})), api.JoinRequest{Topics: []string{"audit-log"}})
	// capgate's own credentials keep working beside.
	h.join(t, "billing-us", h.clientCredential(t, []string{"billing-us"}, []string{"orders"}), orders)

	// Key rotation mid-test: the issuer signs with a new ES256 key; its
	// tokens join (one refresh on the unknown kid), the old key's do not.
	oldKey := idp.SigningKey()
	if _, err := idp.Rotate("k2", "ES256", false); err != nil {
		t.Fatal(err)
	}
	rotated := idp.Token(claims(idptest.Claims{"sub": "svc-8"}))
	h.join(t, "billing-eu", rotated, orders)

	hs256 := jwt.NewWithClaims(jwt.SigningMethodHS256, claims(idptest.Claims{"iss": idp.URL}))
	hs256.Header["kid"] = "k2"
	confused, _ := hs256.SignedString([]byte(idp.JWKS())) // HMAC keyed with the published key set
	none := jwt.NewWithClaims(jwt.SigningMethodNone, claims(idptest.Claims{"iss": idp.URL}))
	none.Header["kid"] = "k2"
	unsigned, _ := none.SignedString(jwt.UnsafeAllowNoneSignatureType)
	unknownKid, err := idptest.NewKey("k-unknown", "ES256")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		token  string
		group  string
		status int
		code   api.Code
	}{
		{"wrong issuer", other.Token(claims(nil)), "billing-eu", 401, api.CodeUnauthorized},
		{"wrong audience", idp.Token(claims(idptest.Claims{"aud": "kafka"})), "billing-eu", 401, api.CodeUnauthorized},
		{"expired", idp.Token(claims(idptest.Claims{"exp": now.Add(-time.Minute).Unix()})), "billing-eu", 401, api.CodeTokenExpired},
		{"unknown kid", idp.TokenWith(unknownKid, claims(nil)), "billing-eu", 401, api.CodeUnauthorized},
		{"retired key", idp.TokenWith(oldKey, claims(nil)), "billing-eu", 401, api.CodeUnauthorized},
		{"alg confusion HS256", confused, "billing-eu", 401, api.CodeUnauthorized},
		{"alg none", unsigned, "billing-eu", 401, api.CodeUnauthorized},
		{"claims map to nothing", idp.Token(claims(idptest.Claims{"groups": []string{"finance"}})), "billing-eu", 403, api.CodeForbidden},
		{"group outside the mapping", idp.Token(claims(nil)), "payments", 403, api.CodeForbidden},
	} {
		status, body, _ := h.do(t, "POST", "/v1/groups/"+c.group+"/join", c.token, orders)
		if status != c.status || errorCode(t, body) != c.code {
			t.Errorf("%s: %d %s, want %d %s", c.name, status, body, c.status, c.code)
		}
	}

	// Deny the identity (its id from issuer and subject): its tokens are
	// refused, however fresh, and the member it opened is revoked.
	id := identity.IdentityID(idp.URL, "svc-7")
	h.call(t, "POST", "/v1/admin/capabilities/"+id+"/revoke", e.adminToken, map[string]any{}, 200, nil)
	h.expectError(t, "POST", "/v1/groups/billing-eu/join", idp.Token(claims(nil)), orders, 409, api.CodeCapabilityRevoked)
	h.expectError(t, "POST", "/v1/groups/billing-eu/heartbeat", first.token, api.HeartbeatRequest{}, 409, api.CodeUnknownMember)
	if fetches := idp.JWKSFetches.Load(); fetches < 2 {
		t.Fatalf("%d JWKS fetches: want the first and one after the rotation", fetches)
	}
	e.checkLogs(t)
}
