package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"go.uber.org/zap"
)

// TestDevBannerHidesSecrets: the banner of a real dev stack points at the
// console and the credentials file, and prints none of its tokens (they
// are in credentials.env and credentials.json).
func TestDevBannerHidesSecrets(t *testing.T) {
	f := devFlags{dataDir: t.TempDir(), brokerAddr: "127.0.0.1:0", coordinatorAddr: "127.0.0.1:0", gatewayAddr: "127.0.0.1:0"}
	dev, err := startDev(context.Background(), f, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	secrets := []string{dev.creds.AdminToken, dev.creds.ClientCredential, dev.creds.SyncToken}
	for _, demo := range []bool{false, true} {
		var out bytes.Buffer
		printDevBanner(&out, dev, demo)
		banner := out.String()
		for _, want := range []string{"console:      " + dev.CoordinatorURL() + "/console", credentialsFile, credentialsEnvFile, "mode 0600"} {
			if !strings.Contains(banner, want) {
				t.Errorf("demo=%v: banner lacks %q:\n%s", demo, want, banner)
			}
		}
		for _, secret := range secrets {
			if secret == "" || strings.Contains(banner, secret) {
				t.Errorf("demo=%v: banner prints a secret (or the stack has an empty one):\n%s", demo, banner)
			}
		}
		if !demo && !strings.Contains(banner, "export CAPGATE_COORDINATOR_URL="+dev.CoordinatorURL()) {
			t.Errorf("banner lacks the coordinator URL export:\n%s", banner)
		}
	}
}
