package cli_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/internal/stack"
)

// TestGatewayReadyzSaysWhySyncFails: an operator starts `capgate gateway`
// beside `capgate dev`'s coordinator with a sync token it does not know
// (a copy-paste slip, a token made for another coordinator). The
// gateway never becomes ready, and its /readyz — what the operator and
// the orchestrator's probe look at — says why: 503 naming the
// coordinator's refusal ("sync token refused") in its message and
// checks.sync. It said "gateway has not synced with the coordinator
// yet" whatever the cause, the reason only in the gateway's log
// (newuser4 #16).
func TestGatewayReadyzSaysWhySyncFails(t *testing.T) {
	t.Parallel()
	d := startDev(t, t.TempDir())
	// Port 0: the gateway logs the address it took ("gateway started",
	// url) — a port picked and closed here could be taken meanwhile.
	config := filepath.Join(t.TempDir(), "gateway.yaml")
	writeFile(t, config, fmt.Sprintf("gateway:\n  id: wrong-token\n  listen: 127.0.0.1:0\n  coordinator_url: %s\n  sync_token: not-the-sync-token\n  broker:\n    seeds: [%s]\n",
		d.coordinator, d.broker))
	gw := exec.Command(capgate, "gateway", "--config", config)
	gw.Env = stack.CleanEnv()
	stderr := &syncBuffer{}
	gw.Stderr = stderr
	if err := gw.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Process.Kill(); gw.Wait() })

	started := regexp.MustCompile(`"msg":"gateway started","url":"(http://[^"]+)"`)
	var url string
	eventually(t, 20*time.Second, "the gateway logs the address it serves", func() (bool, string) {
		if m := started.FindStringSubmatch(stderr.String()); m != nil {
			url = m[1]
		}
		return url != "", stderr.String()
	})
	var body struct {
		Error struct {
			Code    string            `json:"code"`
			Message string            `json:"message"`
			Checks  map[string]string `json:"checks"`
		} `json:"error"`
	}
	eventually(t, 20*time.Second, "/readyz names the refused sync token", func() (bool, string) {
		resp, err := http.Get(url + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("/readyz of a gateway whose sync token is refused: %d %s", resp.StatusCode, raw)
		}
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Fatalf("/readyz: %s: %v", raw, err)
		}
		return strings.Contains(body.Error.Message, "sync token refused") && strings.Contains(body.Error.Checks["sync"], "401"),
			fmt.Sprintf("%s\ngateway log:\n%s", raw, stderr.String())
	})
	if body.Error.Code != "not_ready" {
		t.Errorf("/readyz code %q, want not_ready", body.Error.Code)
	}
}
