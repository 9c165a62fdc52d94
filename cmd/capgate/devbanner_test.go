package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/capgate/capgate/broker"
)

// TestDevBannerHidesSecrets: the banner points at the console and the
// credentials file, and prints no token (they are in credentials.env).
func TestDevBannerHidesSecrets(t *testing.T) {
	kafka, err := broker.StartEmbedded(broker.EmbeddedConfig{Topics: map[string]int32{devTopic: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer kafka.Close()
	s := &devStack{
		dataDir: "capgate-data", broker: kafka,
		coordinatorURL: "http://127.0.0.1:7070", gatewayURL: "http://127.0.0.1:8080",
		creds: devCredentials{AdminToken: "admin-secret-x", ClientCredential: "client-secret-x", SyncToken: "sync-secret-x"},
	}
	for _, demo := range []bool{false, true} {
		var out bytes.Buffer
		printDevBanner(&out, s, demo)
		banner := out.String()
		for _, want := range []string{"console:      http://127.0.0.1:7070/console", "capgate-data/credentials.json"} {
			if !strings.Contains(banner, want) {
				t.Errorf("demo=%v: banner lacks %q:\n%s", demo, want, banner)
			}
		}
		for _, secret := range []string{"admin-secret-x", "client-secret-x", "sync-secret-x"} {
			if strings.Contains(banner, secret) {
				t.Errorf("demo=%v: banner prints a secret:\n%s", demo, banner)
			}
		}
		if !demo && !strings.Contains(banner, "export CAPGATE_COORDINATOR_URL=http://127.0.0.1:7070") {
			t.Errorf("banner lacks the coordinator URL export:\n%s", banner)
		}
	}
}
