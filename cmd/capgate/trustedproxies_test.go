package main

import (
	"strings"
	"testing"
)

// TestTrustedProxiesFromEnv: trusted_proxies is a list like any other
// (CAPGATE_*_TRUSTED_PROXIES, comma-separated), and a bad entry stops the
// process that reads it with an error naming the key.
func TestTrustedProxiesFromEnv(t *testing.T) {
	t.Setenv("CAPGATE_GATEWAY_TRUSTED_PROXIES", "10.0.0.0/8, fd00::/8")
	t.Setenv("CAPGATE_COORDINATOR_TRUSTED_PROXIES", "192.0.2.7")
	cfg, err := loadConfig("", "gateway")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.Gateway.TrustedProxies, " "); got != "10.0.0.0/8 fd00::/8" || cfg.Coordinator.TrustedProxies[0] != "192.0.2.7" {
		t.Fatalf("gateway %q, coordinator %q", cfg.Gateway.TrustedProxies, cfg.Coordinator.TrustedProxies)
	}
	t.Setenv("CAPGATE_GATEWAY_TRUSTED_PROXIES", "10.0.0.0/8,10.1.2.3/16")
	if _, err := loadConfig("", "gateway"); err == nil || !strings.HasPrefix(err.Error(), `config: gateway: gateway.trusted_proxies[1]: "10.1.2.3/16" has address bits set past /16`) {
		t.Fatalf("err = %v", err)
	}
	t.Setenv("CAPGATE_COORDINATOR_TRUSTED_PROXIES", "0.0.0.0/0")
	if _, err := loadConfig("", "coordinator"); err == nil || !strings.HasPrefix(err.Error(), `config: coordinator: trusted_proxies[0]: "0.0.0.0/0" trusts every peer`) {
		t.Fatalf("err = %v", err)
	}
}
