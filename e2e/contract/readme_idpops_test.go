package contract

import (
	"context"
	"testing"
	"time"

	"github.com/capgate/capgate/identity"
	"github.com/capgate/capgate/identity/idptest"
)

// TestReadmeIdPRuleOps keeps "Use your IdP"'s word on rule ops true of
// its YAML block: a token in orders-writers and kafka-billing may write
// orders and nothing else (not orders-writers' own orders-* pattern,
// not kafka-billing's exact invoices and payments); a kafka-billing
// token alone (a rule without ops) writes nowhere.
func TestReadmeIdPRuleOps(t *testing.T) {
	tags, blocks := readmeSection(t, "## Use your IdP")
	var oidc identity.Config
	for i, b := range blocks {
		if tags[i] == "yaml" {
			oidc = decodeReadmeYAML(t, "Use your IdP", b).Coordinator.OIDC
		}
	}
	if len(oidc.Issuers) != 1 {
		t.Fatalf("README Use your IdP: %d oidc issuers, want 1", len(oidc.Issuers))
	}
	idp := idptest.New(t, "RS256")
	oidc.Issuers[0].Issuer, oidc.Issuers[0].CAFile = idp.URL, idp.CAFile
	v, err := identity.New(oidc, nil)
	if err != nil {
		t.Fatalf("README Use your IdP: the oidc block as written: %v", err)
	}
	verify := func(groups ...string) identity.Identity {
		t.Helper()
		now := time.Now()
		token := idp.Token(idptest.Claims{"sub": "svc", "aud": "capgate", "groups": groups, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()})
		id, err := v.Verify(context.Background(), token, now)
		if err != nil {
			t.Fatalf("groups %v: %v", groups, err)
		}
		return id
	}
	both := verify("orders-writers", "kafka-billing")
	for topic, want := range map[string]bool{"orders": true, "orders-eu": false, "invoices": false, "payments": false} {
		if got := both.MayProduceTo(topic); got != want {
			t.Errorf("README: a token in orders-writers and kafka-billing may write %s: %v, want %v", topic, got, want)
		}
	}
	if billing := verify("kafka-billing"); billing.ProducesAnywhere() {
		t.Errorf("README: a kafka-billing token (a rule without ops) writes %q, want nowhere", billing.ProduceTopics)
	}
}
