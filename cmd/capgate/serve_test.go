package main

import (
	"context"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/capgate/capgate/broker"
	"github.com/capgate/capgate/coordinator"
)

// TestCoordinatorWarnsWithoutAdminHashes runs `capgate coordinator
// --config config.example.yaml` (an operator's first try; only its
// addresses moved to loopback port 0, a temporary data dir and an
// embedded Kafka): with admin_token_hashes: [] it logs a WARN that the
// admin API and the console refuse every token, and how to make one —
// and one for sync_token_hashes: []. It started without a word. With
// hashes configured nothing warns.
func TestCoordinatorWarnsWithoutAdminHashes(t *testing.T) {
	kafka, err := broker.StartEmbedded(broker.EmbeddedConfig{Topics: map[string]int32{"orders": 1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kafka.Close)
	file, err := loadConfig("../../config.example.yaml", "coordinator")
	if err != nil {
		t.Fatal(err)
	}
	cfg := file.Coordinator
	cfg.Listen, cfg.Broker.Seeds = "127.0.0.1:0", kafka.Addrs()
	if len(cfg.AdminTokenHashes) != 0 || len(cfg.SyncTokenHashes) != 0 {
		t.Fatalf("config.example.yaml has hashes now: %v %v", cfg.AdminTokenHashes, cfg.SyncTokenHashes)
	}
	_, hash, err := coordinator.GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	for _, hashes := range [][]string{nil, {hash}} {
		cfg.DataDir, cfg.AdminTokenHashes, cfg.SyncTokenHashes = t.TempDir(), hashes, hashes
		core, logs := observer.New(zapcore.InfoLevel)
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // start, then stop at once
		if err := runCoordinator(ctx, cfg, zap.New(core)); err != nil {
			t.Fatalf("coordinator with hashes %v: %v", hashes, err)
		}
		if logs.FilterMessageSnippet("coordinator restored").Len() != 1 {
			t.Fatalf("the coordinator did not start: %+v", logs.All())
		}
		warned := logs.FilterLevelExact(zapcore.WarnLevel)
		admin := warned.FilterMessageSnippet("no coordinator.admin_token_hashes").All()
		sync := warned.FilterMessageSnippet("no coordinator.sync_token_hashes").All()
		if hashes != nil {
			if len(admin)+len(sync) != 0 {
				t.Fatalf("warned with hashes configured: %+v", warned.All())
			}
			continue
		}
		if len(admin) != 1 || len(sync) != 1 {
			t.Fatalf("warnings %+v, want one about admin_token_hashes and one about sync_token_hashes", warned.All())
		}
		for _, want := range []string{"admin API", "console", "capgate keys secret"} {
			if !strings.Contains(admin[0].Message, want) {
				t.Errorf("the warning %q does not say %q", admin[0].Message, want)
			}
		}
	}
}
