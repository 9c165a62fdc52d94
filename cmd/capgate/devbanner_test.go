package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
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

// TestDevBannerCurlJoins runs the banner's curl line, as printed, in a
// shell that sourced credentials.env: it joins group g (200), with one
// coordinator and with --replicas 3. With replicas the line used
// $CAPGATE_COORDINATOR_URL, which then holds the replicas' list
// comma-separated: curl took it for one URL ("bad port") and joined
// nothing.
func TestDevBannerCurlJoins(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl")
	}
	for _, replicas := range []int{0, 3} {
		t.Run(fmt.Sprintf("replicas=%d", replicas), func(t *testing.T) {
			dir := t.TempDir()
			f := devFlags{dataDir: dir, brokerAddr: "127.0.0.1:0", coordinatorAddr: "127.0.0.1:0", gatewayAddr: "127.0.0.1:0", replicas: replicas}
			dev, err := startDev(context.Background(), f, zap.NewNop())
			if err != nil {
				t.Fatal(err)
			}
			defer dev.Close()
			sourceCredentialsEnv(t, dir)
			var out bytes.Buffer
			printDevBanner(&out, dev, false)
			line := bannerCommand(t, out.String(), "curl ")
			status, err := exec.Command("sh", "-c", line+" -s -o /dev/null -w '%{http_code}'").Output()
			if err != nil || string(status) != "200" {
				t.Fatalf("the banner's curl line answered %q (%v):\n%s", status, err, line)
			}
		})
	}
}

// bannerCommand is the banner's command starting with prefix, with its
// continuation lines.
func bannerCommand(t *testing.T, banner, prefix string) string {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(banner, "\n") {
		l = strings.TrimSpace(l)
		if len(lines) == 0 && !strings.HasPrefix(l, prefix) {
			continue
		}
		lines = append(lines, l)
		if !strings.HasSuffix(l, "\\") {
			return strings.Join(lines, "\n")
		}
	}
	t.Fatalf("no %q command in the banner:\n%s", prefix, banner)
	return ""
}
