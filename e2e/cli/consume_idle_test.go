package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/capgate/capgate/api"
)

// TestIdleExitWithoutPartitionSaysWhy: `consume --idle-exit` that ran
// out before any partition was granted exited 0, "nothing to read",
// whatever the reason. A member that got none because the group has more
// members than partitions is idle: exit 0, saying so on stderr. A member
// whose partitions are still on their way — held by a member that has
// not released them yet — is not: exit 1 naming the group's state.
func TestIdleExitWithoutPartitionSaysWhy(t *testing.T) {
	t.Parallel()
	d := startDev(t, t.TempDir())
	creds := d.credentials(t)

	t.Run("more_members_than_partitions", func(t *testing.T) {
		createTopic(t, d.broker, "solo", 1)
		soloArgs := func(extra ...string) []string {
			return append([]string{"consume", "--group", "solo", "--topic", "solo", "--credential-file", filepath.Join(d.dataDir, "credentials.json"),
				"--coordinator", d.coordinator, "--gateways", d.gateway}, extra...)
		}
		first := startConsume(t, soloArgs()...)
		eventually(t, 60*time.Second, "the first member holds solo/0 in a Stable group", func() (bool, string) {
			g := tenantGroup(t, d.coordinator, creds.ClientCredential, "solo")
			return g.State == "Stable" && len(g.Members) == 1 && len(g.Members[0].Owned) == 1, fmt.Sprintf("%+v", g)
		})
		stdout, stderr, err := cliResult(t, soloArgs("--idle-exit", "6s")...)
		if err != nil || stdout != "" || !strings.Contains(stderr, "idle for --idle-exit 6s with no partition: group solo is Stable and every partition it gives out (1) is held by another member") {
			t.Fatalf("second member of a one-partition group: %v, stdout %q, stderr:\n%s\nwant exit 0 saying it is idle with no partition", err, stdout, stderr)
		}
		if ok, why := first.running(); !ok {
			t.Fatal(why)
		}
	})

	t.Run("partitions_still_held", func(t *testing.T) {
		// A member that joined and holds every partition of demo, and
		// never heartbeats nor releases: a second member's half is
		// revoked from it, and stays being revoked (its session and
		// the group's handoff_timeout outlast the test).
		joinSilently(t, d.coordinator, creds.ClientCredential, "held")
		d.adminCLI(t, "config", "held", "--handoff-timeout", "2m")
		_, stderr, err := cliResult(t, d.consumeArgs("held", "--idle-exit", "6s")...)
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 ||
			!strings.Contains(stderr, "no partition was granted within --idle-exit 6s: group held is PreparingRebalance — its partitions are still being handed out") {
			t.Fatalf("member waiting for its partitions: %v, stderr:\n%s\nwant exit 1 naming the rebalance", err, stderr)
		}
	})
	t.Run("move_held_back_by_max_moves_per_second", func(t *testing.T) {
		// A holds every partition of crawla (80) and crawlb (2) in a
		// group moving one partition a second; X joins for crawla
		// (40 moves, one a second, in partition order), then this
		// member for crawlb: its move comes after X's. Between two
		// of X's handoffs nothing is being revoked, and the group
		// read Stable: the member, whose partition was still to
		// come, exited 0 as idle with no partition (firstday7's
		// left).
		createTopic(t, d.broker, "crawla", 80)
		createTopic(t, d.broker, "crawlb", 2)
		crawlArgs := func(topic string, extra ...string) []string {
			return append([]string{"consume", "--group", "crawl", "--topic", topic, "--credential-file", filepath.Join(d.dataDir, "credentials.json"),
				"--coordinator", d.coordinator, "--gateways", d.gateway}, extra...)
		}
		a := startConsume(t, crawlArgs("crawla,crawlb")...)
		eventually(t, 90*time.Second, "the first member holds all 82 partitions in a Stable group", func() (bool, string) {
			g := tenantGroup(t, d.coordinator, creds.ClientCredential, "crawl")
			return g.State == "Stable" && len(g.Members) == 1 && len(g.Members[0].Owned) == 82, fmt.Sprintf("%+v", g)
		})
		d.adminCLI(t, "config", "crawl", "--max-moves-per-second", "1")
		x := startConsume(t, crawlArgs("crawla")...)
		eventually(t, 90*time.Second, "the second member holds a partition of crawla", func() (bool, string) {
			g := tenantGroup(t, d.coordinator, creds.ClientCredential, "crawl")
			for _, m := range g.Members {
				if len(m.Owned) > 0 && len(m.Topics) == 1 {
					return true, ""
				}
			}
			return false, fmt.Sprintf("%+v", g)
		})
		_, stderr, err := cliResult(t, crawlArgs("crawlb", "--idle-exit", "6s")...)
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 ||
			!strings.Contains(stderr, "no partition was granted within --idle-exit 6s: group crawl is PreparingRebalance — its partitions are still being handed out") {
			t.Fatalf("member waiting for a move held back: %v, stderr:\n%s\nwant exit 1 naming the rebalance", err, stderr)
		}
		for _, p := range []*consumeProcess{a, x} {
			if ok, why := p.running(); !ok {
				t.Fatal(why)
			}
		}
		// X's moves still creep (one a second): `admin group` said
		// Stable between two of them.
		out := d.adminCLI(t, "group", "crawl", "-o", "table")
		if !strings.Contains(out, "moves held back by max_moves_per_second 1)") || !strings.Contains(out, "Rebalancing (") {
			t.Fatalf("admin group crawl while moves creep:\n%s\nwant Rebalancing with the moves held back", out)
		}
		var desc struct {
			MovesHeldBack int `json:"moves_held_back"`
		}
		if d.adminJSON(t, &desc, "group", "crawl"); desc.MovesHeldBack == 0 {
			t.Fatal("admin group crawl -o json: no moves_held_back while moves creep")
		}
	})
	d.stop(false)
}

// createTopic creates topic with n partitions on the broker directly.
func createTopic(t *testing.T, broker, topic string, n int32) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, n, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
}

// tenantGroup is GET /v1/groups/{group} with the client credential.
func tenantGroup(t *testing.T, coordinator, credential, group string) api.TenantGroupDescription {
	t.Helper()
	var g api.TenantGroupDescription
	req, _ := http.NewRequest(http.MethodGet, coordinator+"/v1/groups/"+group, nil)
	req.Header.Set("Authorization", "Bearer "+credential)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&g); err != nil {
			t.Fatal(err)
		}
	}
	return g
}

// joinSilently joins group for demo with a 5-minute session and never
// heartbeats: the member holds what the join granted it.
func joinSilently(t *testing.T, coordinator, credential, group string) {
	t.Helper()
	body, _ := json.Marshal(api.JoinRequest{Topics: []string{"demo"}, SessionTimeoutMs: (5 * time.Minute).Milliseconds(), ClientID: "silent"})
	req, _ := http.NewRequest(http.MethodPost, coordinator+"/v1/groups/"+group+"/join", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+credential)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var joined api.JoinResponse
	if err := json.NewDecoder(resp.Body).Decode(&joined); err != nil || resp.StatusCode != http.StatusOK || len(joined.Grants) != 12 {
		t.Fatalf("silent join: %d %v, %d grants", resp.StatusCode, err, len(joined.Grants))
	}
}
