package identity_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/identity"
	"github.com/capgate/capgate/identity/idptest"
)

// TestIdPTokensCheckedAsDocumented is redteam6 #6: with the test IdP
// (RS256, a configured issuer and audience) each of these tokens joined —
// a crit header capgate does not implement, no iat (the docs said iat is
// checked), exp in the year 2200, a refresh token's typ, an azp of a
// client the operator never named, a 4,000-byte or control-character sub,
// and claims or header keys given twice (golang-jwt reads the last,
// other readers the first). Each is refused now, naming what is wrong;
// the tokens an IdP really issues still verify.
func TestIdPTokensCheckedAsDocumented(t *testing.T) {
	now := time.Now()
	is := idptest.New(t, "RS256")
	cfg := config(is)
	bound := config(is).Issuers[0]
	bound.Issuer, bound.AuthorizedParties = is.URL, []string{"capgate-svc"}
	v := newVerifier(t, cfg)
	vAzp := newVerifier(t, identity.Config{Issuers: []identity.IssuerConfig{bound}, JWKSRefreshMin: cfg.JWKSRefreshMin, JWKSCacheTTL: cfg.JWKSCacheTTL,
		FetchTimeout: cfg.FetchTimeout, MaxJWKSBytes: cfg.MaxJWKSBytes, MaxTokenBytes: cfg.MaxTokenBytes, Leeway: cfg.Leeway, MaxTokenLifetime: cfg.MaxTokenLifetime})
	kid := is.SigningKey().Kid
	good := func(extra idptest.Claims) idptest.Claims {
		c := claims(now, idptest.Claims{"groups": []string{"kafka-billing"}, "iss": is.URL, "azp": "capgate-svc"})
		for k, val := range extra {
			c[k] = val
		}
		return c
	}
	header := `{"alg":"RS256","kid":"` + kid + `","typ":"JWT"`
	body := strings.TrimSuffix(mustJSON(good(nil)), "}")
	for _, c := range []struct {
		name, token, says string
		v                 *identity.Verifier
	}{
		{"crit header", is.SignRaw(header+`,"crit":["exp2"],"exp2":1}`, body+`}`), "crit", v},
		{"no iat", is.Token(without(good(nil), "iat")), "iat", v},
		{"exp in 2200", is.Token(good(idptest.Claims{"exp": int64(7258118400)})), "max_token_lifetime", v},
		{"lifetime a second over 24h", is.Token(good(idptest.Claims{"exp": now.Add(24*time.Hour + time.Second).Unix()})), "max_token_lifetime", v},
		{"typ Refresh", is.SignRaw(`{"alg":"RS256","kid":"`+kid+`","typ":"Refresh"}`, body+`}`), "typ", v},
		{"typ logout+jwt", is.SignRaw(`{"alg":"RS256","kid":"`+kid+`","typ":"logout+jwt"}`, body+`}`), "typ", v},
		{"azp of another client", is.Token(good(idptest.Claims{"azp": "evil-client", "aud": []string{"other", "capgate"}})), "azp", vAzp},
		{"no azp where authorized_parties are named", is.Token(without(good(nil), "azp")), "azp", vAzp},
		{"4,000-byte sub", is.Token(good(idptest.Claims{"sub": strings.Repeat("s", 4000)})), "4000 bytes > 255", v},
		{"control characters in sub", is.Token(good(idptest.Claims{"sub": "a\u0000b\n\u001b[31m"})), "control character", v},
		{"groups twice, the last mapped", is.SignRaw(header+`}`, strings.Replace(body, `"groups":["kafka-billing"]`, `"groups":["finance"],"groups":["kafka-billing"]`, 1)+`}`), `duplicate key "groups"`, v},
		{"alg twice", is.SignRaw(`{"alg":"none","kid":"`+kid+`","alg":"RS256"}`, body+`}`), `duplicate key "alg"`, v},
	} {
		id, err := c.v.Verify(context.Background(), c.token, now)
		if !errors.Is(err, identity.ErrInvalid) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %+v, %v; want ErrInvalid saying %s", c.name, id, err, c.says)
		}
	}
	for _, c := range []struct {
		name, token string
		v           *identity.Verifier
	}{
		{"typ JWT", is.SignRaw(header+`}`, body+`}`), v},
		{"typ at+jwt (RFC 9068)", is.SignRaw(`{"alg":"RS256","kid":"`+kid+`","typ":"at+jwt"}`, body+`}`), v},
		{"no typ", is.SignRaw(`{"alg":"RS256","kid":"`+kid+`"}`, body+`}`), v},
		{"lifetime exactly 24h", is.Token(good(idptest.Claims{"exp": now.Add(24 * time.Hour).Unix()})), v},
		{"an authorized azp", is.Token(good(nil)), vAzp},
		{"any azp where no authorized_parties are named", is.Token(good(idptest.Claims{"azp": "evil-client"})), v},
		{"255-byte sub", is.Token(good(idptest.Claims{"sub": strings.Repeat("s", 255)})), v},
	} {
		if _, err := c.v.Verify(context.Background(), c.token, now); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func without(c idptest.Claims, key string) idptest.Claims {
	delete(c, key)
	return c
}
