package identity_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/identity"
	"github.com/capgate/capgate/identity/idptest"
	"github.com/capgate/capgate/ocap"
)

// TestRuleOpsValidated: a rule's ops take a client credential's
// vocabulary and checks; each refusal names the key of the bad entry.
func TestRuleOpsValidated(t *testing.T) {
	good := identity.Rule{Claim: "groups", Value: "w", Groups: []string{"g"}, Topics: []string{"orders"}}
	for _, c := range []struct {
		ops, topics []string
		key, says   string
	}{
		{[]string{"consume", "fetch"}, nil, "oidc.issuers[0].rules[1].ops[1]", `unknown op: "fetch"`},
		{[]string{"write"}, nil, "oidc.issuers[0].rules[1].ops[0]", `unknown op: "write"`},
		{[]string{"produce"}, nil, "oidc.issuers[0].rules[1].ops", "consume is required"},
		{[]string{"consume", "produce"}, []string{"orders-*", "*"}, "oidc.issuers[0].rules[1].ops", "produce needs a topic named exactly"},
		{[]string{"consume", "produce"}, []string{}, "oidc.issuers[0].rules[1].ops", "produce needs a topic named exactly"},
		{slices.Repeat([]string{"consume"}, 9), nil, "oidc.issuers[0].rules[1].ops", "at most 8"},
	} {
		bad := good
		bad.Ops = c.ops
		if c.topics != nil {
			bad.Topics = c.topics
		}
		cfg := identity.DefaultConfig()
		cfg.Issuers = []identity.IssuerConfig{{Issuer: "https://idp.example", Audiences: []string{"a"}, Rules: []identity.Rule{good, bad}}}
		err := cfg.Validate("oidc")
		if err == nil || !strings.HasPrefix(err.Error(), c.key+": ") || !strings.Contains(err.Error(), c.says) {
			t.Errorf("ops %q topics %q: %v, want %q naming %s", c.ops, bad.Topics, err, c.says, c.key)
		}
	}
	for _, ops := range [][]string{nil, {"consume"}, {"consume", "produce"}, {"produce", "consume", "consume"}} {
		ok := good
		ok.Ops, ok.Topics = ops, []string{"orders", "audit-*"}
		cfg := identity.DefaultConfig()
		cfg.Issuers = []identity.IssuerConfig{{Issuer: "https://idp.example", Audiences: []string{"a"}, Rules: []identity.Rule{ok}}}
		if err := cfg.Validate("oidc"); err != nil {
			t.Errorf("ops %q: %v", ops, err)
		}
	}
}

// TestProduceTopicsFromProduceRulesOnly: an identity's ops are the
// union of its matching rules', but it may write only to the exact
// topics of the rules granting produce. A produce rule on orders
// (beside a pattern of its own) plus a consume rule on "*" and one on
// payments exactly: it reads all of them and writes orders alone. A
// token matching no produce rule is consume only, as every identity was
// before rules had ops.
func TestProduceTopicsFromProduceRulesOnly(t *testing.T) {
	is := idptest.New(t, "ES256")
	cfg := identity.DefaultConfig()
	cfg.Issuers = []identity.IssuerConfig{{Issuer: is.URL, CAFile: is.CAFile, Audiences: []string{"capgate"},
		Rules: []identity.Rule{
			{Claim: "groups", Value: "orders-writers", Groups: []string{"writers"}, Topics: []string{"orders", "orders-*"}, Ops: []string{"consume", "produce"}},
			{Claim: "groups", Value: "readers", Groups: []string{"readers"}, Topics: []string{"*"}},
			{Claim: "groups", Value: "payments-readers", Groups: []string{"readers"}, Topics: []string{"payments"}, Ops: []string{"consume"}},
		}}}
	v := newVerifier(t, cfg)
	now := time.Now()
	verify := func(groups ...string) identity.Identity {
		t.Helper()
		id, err := v.Verify(context.Background(), is.Token(claims(now, idptest.Claims{"groups": groups})), now)
		if err != nil {
			t.Fatalf("groups %v: %v", groups, err)
		}
		return id
	}

	both := verify("orders-writers", "readers", "payments-readers")
	if both.Ops != ocap.ClientOpsAll || !slices.Equal(both.ProduceTopics, []string{"orders"}) {
		t.Fatalf("produce rule + consume rules: ops %s, produce topics %q; want consume,produce and [orders]", both.Ops, both.ProduceTopics)
	}
	if !slices.Equal(both.Topics, []string{"orders", "orders-*", "*", "payments"}) {
		t.Fatalf("topics %q: every rule's topics are read", both.Topics)
	}
	for topic, want := range map[string]bool{"orders": true, "payments": false, "orders-eu": false, "audit": false, "": false} {
		if got := both.MayProduceTo(topic); got != want {
			t.Errorf("MayProduceTo(%q) = %v, want %v", topic, got, want)
		}
	}
	if !both.ProducesAnywhere() {
		t.Error("ProducesAnywhere = false with a produce rule")
	}

	for _, groups := range [][]string{{"readers"}, {"readers", "payments-readers"}} {
		id := verify(groups...)
		if id.Ops != ocap.ClientOpsDefault || id.ProducesAnywhere() || id.MayProduceTo("payments") || id.MayProduceTo("orders") {
			t.Errorf("groups %v (no produce rule): ops %s, produce topics %q; want consume only", groups, id.Ops, id.ProduceTopics)
		}
	}
}
