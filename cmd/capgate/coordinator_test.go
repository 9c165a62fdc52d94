package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"testing"

	"go.uber.org/zap"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/broker"
	"github.com/capgate/capgate/coordinator"
)

// startCoordinator runs a real coordinator on loopback against an
// embedded broker and returns its base URL and an admin token.
func startCoordinator(t *testing.T) (base, adminToken string) {
	t.Helper()
	kafka, err := broker.StartEmbedded(broker.EmbeddedConfig{Topics: map[string]int32{"orders": 2}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kafka.Close)
	admin, hash, err := coordinator.GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	cfg := coordinator.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Broker.Seeds = kafka.Addrs()
	cfg.AdminTokenHashes = []string{hash}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c, err := coordinator.New(cfg, zap.NewNop(), coordinator.WithListener(ln))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(context.Background()) }()
	t.Cleanup(func() {
		c.Close()
		if err := <-done; err != nil {
			t.Errorf("coordinator: %v", err)
		}
	})
	return "http://" + c.Addr().String(), admin
}

func fetchJWKS(t *testing.T, base string) map[string]bool {
	t.Helper()
	resp, err := http.Get(base + "/.well-known/jwks.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var set api.JWKS
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
		t.Fatal(err)
	}
	kids := map[string]bool{}
	for _, k := range set.Keys {
		kids[k.Kid] = true
	}
	return kids
}
