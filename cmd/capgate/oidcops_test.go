package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// oidcOpsYAML is a coordinator's oidc section and a gateway's kafka_oidc
// with the same issuer; rules[1]'s ops are ops.
func oidcOpsYAML(ops string) string {
	issuer := `
    issuers:
      - issuer: https://idp.example/realms/prod
        audiences: [capgate]
        rules:
          - {claim: groups, value: kafka-writers, groups: [billing-*], topics: [orders, "orders-*"], ops: [consume, produce]}
          - {claim: groups, value: kafka-readers, groups: [billing-*], topics: ["*"], ops: ` + ops + `}
`
	return "coordinator:\n  oidc:" + issuer + "gateway:\n  kafka_listen: 127.0.0.1:0\n  kafka_oidc:" + issuer
}

// TestOIDCRuleOpsAtConfigLoad: a rule's ops load from the file for the
// coordinator's oidc and the gateway's kafka_oidc; an unknown op stops
// either process at config load with an error naming the entry's key
// and the op, and so does a rule without consume.
func TestOIDCRuleOpsAtConfigLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "capgate.yaml")
	write := func(ops string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(oidcOpsYAML(ops)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("[consume]")
	for _, section := range []string{"coordinator", "gateway"} {
		cfg, err := loadConfig(path, section)
		if err != nil {
			t.Fatalf("%s: %v", section, err)
		}
		rules := cfg.Coordinator.OIDC.Issuers[0].Rules
		if section == "gateway" {
			rules = cfg.Gateway.KafkaOIDC.Issuers[0].Rules
		}
		if !slices.Equal(rules[0].Ops, []string{"consume", "produce"}) || !slices.Equal(rules[1].Ops, []string{"consume"}) {
			t.Fatalf("%s: rules' ops %q, %q", section, rules[0].Ops, rules[1].Ops)
		}
	}
	for _, c := range []struct{ ops, key, says string }{
		{"[consume, write]", "issuers[0].rules[1].ops[1]", `unknown op: "write"`},
		{"[fetch]", "issuers[0].rules[1].ops[0]", `unknown op: "fetch"`},
		{"[produce]", "issuers[0].rules[1].ops", "consume is required"},
		{"[consume, produce]", "issuers[0].rules[1].ops", "produce needs a topic named exactly"},
	} {
		write(c.ops)
		for section, prefix := range map[string]string{"coordinator": "oidc.", "gateway": "gateway.kafka_oidc."} {
			_, err := loadConfig(path, section)
			if err == nil || !strings.Contains(err.Error(), prefix+c.key+": ") || !strings.Contains(err.Error(), c.says) {
				t.Errorf("%s with ops %s: %v, want %q naming %s%s", section, c.ops, err, c.says, prefix, c.key)
			}
		}
	}
}
