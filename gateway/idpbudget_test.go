package gateway

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/identity"
	"github.com/capgate/capgate/identity/idptest"
)

// idpForged is token with its signature's first characters replaced
// (a real kid and claims, the signature's length kept, so the check
// reaches the RSA verification).
func idpForged(token string, i int) string {
	dot := strings.LastIndex(token, ".")
	return token[:dot+1] + fmt.Sprintf("%06d", i) + token[dot+7:]
}

// TestForgedIdPTokensOverKafkaAreBudgeted is redteam8 #2: IdP tokens
// over the Kafka listener's SASL (gateway.kafka_oidc) were verified with
// no budget of failed verifications at all — 2,000 forged RS256 tokens
// from one address, 2,000 signature checks, even while the address's
// budget was spent. Now they take from the address's budget as capgate's
// tokens do: the flood gets exactly the burst checked, then is refused
// unchecked; an identity verified from the address before still has its
// fresh token checked (the known holder: its iss and sub), on a budget
// of its own; another identity's first token is refused while the budget
// is spent.
func TestForgedIdPTokensOverKafkaAreBudgeted(t *testing.T) {
	const burst = 10
	idp := idptest.New(t, "RS256")
	h := newHarnessWith(t, harnessOptions{edit: func(c *Config) {
		c.KafkaListen, c.KafkaFetchLanes = "127.0.0.1:0", 1
		c.AuthFailuresPerSecond, c.AuthFailureBurst = 0.01, burst
		c.KafkaOIDC.Issuers = []identity.IssuerConfig{{Issuer: idp.URL, CAFile: idp.CAFile, Audiences: []string{"capgate"},
			Rules: []identity.Rule{{Claim: "groups", Value: "kafka", Groups: []string{"g"}, Topics: []string{testTopic}}}}}
	}})
	h.waitReady()
	token := func(sub, jti string) string {
		now := time.Now()
		return idp.Token(idptest.Claims{"sub": sub, "aud": "capgate", "jti": jti, "iat": now.Unix(),
			"exp": now.Add(time.Hour).Unix(), "groups": []string{"kafka"}})
	}
	if err := h.saslMetadata("127.0.0.2", token("svc-victim", "v1")); err != nil {
		t.Fatalf("the victim's IdP token before the flood: %v", err)
	}
	attackerOwn := token("svc-attacker", "a1")
	for i := range 3 * burst {
		if err := h.saslMetadata("127.0.0.2", idpForged(attackerOwn, i)); err == nil {
			t.Fatalf("forged IdP token %d authenticated", i)
		}
	}
	if n := counterValue(t, h.gw.metrics.authFailures); n != burst {
		t.Fatalf("%v of %d forged IdP tokens were checked and failed, want the burst %d", n, 3*burst, burst)
	}
	if n := counterValue(t, h.gw.metrics.authThrottled); n != 2*burst {
		t.Fatalf("%v forged IdP tokens refused unchecked, want %d", n, 2*burst)
	}
	if err := h.saslMetadata("127.0.0.2", token("svc-victim", "v2")); err != nil {
		t.Fatalf("the victim's fresh IdP token from the flooded address (a known holder): %v", err)
	}
	err := h.saslMetadata("127.0.0.2", token("svc-never-seen-here", "n1"))
	if err == nil || !strings.Contains(err.Error(), "too many tokens from this address failed verification") {
		t.Fatalf("another identity's first token past the spent budget: %v, want refused unchecked", err)
	}
	// Forgeries naming the victim: its own bucket (a tenth of the burst: 1).
	for i := range 5 {
		_ = h.saslMetadata("127.0.0.2", idpForged(token("svc-victim", "f"), i))
	}
	if n := counterValue(t, h.gw.metrics.authFailures); n != burst+1 {
		t.Fatalf("%v checks failed in all, want %d: forgeries naming the victim spend only its bucket of 1", n, burst+1)
	}
	if err := h.saslMetadata("127.0.0.3", token("svc-elsewhere", "e1")); err != nil {
		t.Fatalf("another address is untouched by the flood: %v", err)
	}
}
