package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/internal/stack"
)

// cliResult runs the capgate binary and returns stdout, stderr and the
// error of a non-zero exit (it does not fail the test).
func cliResult(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, capgate, args...)
	cmd.Env = stack.CleanEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// adminCLI runs `capgate admin ARGS` against d and returns stdout; a
// non-zero exit fails t.
func (d *devProcess) adminCLI(t *testing.T, args ...string) string {
	t.Helper()
	return run(t, 30*time.Second, "", d.adminArgs(args...)...)
}

func (d *devProcess) adminArgs(args ...string) []string {
	return append(append([]string{"admin"}, args...), "--coordinator", d.coordinator, "--token-file", filepath.Join(d.dataDir, "credentials.json"))
}

// adminJSON runs an admin command (piped: JSON) and decodes its answer.
func (d *devProcess) adminJSON(t *testing.T, out any, args ...string) {
	t.Helper()
	raw := d.adminCLI(t, args...)
	if err := json.Unmarshal([]byte(raw), out); err != nil {
		t.Fatalf("admin %s printed %q, not JSON: %v", strings.Join(args, " "), raw, err)
	}
}

// mustMatch fails t unless every pattern matches text.
func mustMatch(t *testing.T, what, text string, patterns ...string) {
	t.Helper()
	for _, p := range patterns {
		if !regexp.MustCompile(p).MatchString(text) {
			t.Errorf("%s: %q does not match %q", what, text, p)
		}
	}
}

// TestAdminDefects: each subtest is one defect of issue #13 an operator
// met on the first day, named after it, run against a real `capgate dev`
// with the capgate binary; each asserts the behaviour that replaced it.
func TestAdminDefects(t *testing.T) {
	work := t.TempDir()
	d := startDev(t, filepath.Join(work, "capgate-data"))
	printf := func(lines ...string) string { return strings.Join(lines, "\n") + "\n" }
	run(t, 30*time.Second, printf("a", "b", "c"), "produce", "--topic", "demo", "--partition", "0",
		"--coordinator", d.coordinator, "--gateways", d.gateway, "--token-file", filepath.Join(d.dataDir, "credentials.json"))

	t.Run("client_credential_without_topics_refused", func(t *testing.T) {
		var out map[string]any
		d.adminJSON(t, &out, "client-credential", "--name", "svc", "--groups", "g1")
		cred, _ := out["client_credential"].(string)
		if strings.Count(cred, ".") != 2 {
			t.Fatalf("client-credential --groups g1 answered %v", out)
		}
	})

	t.Run("client_credential_output_not_read_by_consume", func(t *testing.T) {
		file := filepath.Join(work, "svc.json")
		out := run(t, 30*time.Second, "", d.adminArgs("client-credential", "--name", "svc", "--groups", "readers")...)
		writeFile(t, file, out)
		got := parseConsumed(t, run(t, 30*time.Second, "", "consume", "--group", "readers", "--topic", "demo", "--format", "json",
			"--credential-file", file, "--coordinator", d.coordinator, "--gateways", d.gateway, "--max-records", "3"))
		if len(got) != 3 {
			t.Fatalf("consume with the client-credential file read %d records, want 3", len(got))
		}
		// The old key is still read.
		old := filepath.Join(work, "old.json")
		var m map[string]string
		json.Unmarshal([]byte(out), &m)
		writeFile(t, old, `{"credential":"`+m["client_credential"]+`"}`)
		if got := parseConsumed(t, run(t, 30*time.Second, "", "consume", "--group", "readers", "--topic", "demo", "--format", "json",
			"--credential-file", old, "--coordinator", d.coordinator, "--gateways", d.gateway, "--idle-exit", "1s")); len(got) != 0 {
			t.Fatalf("the group read %d records again", len(got))
		}
	})

	t.Run("group_pattern_accepted_as_a_literal_name", func(t *testing.T) {
		file := filepath.Join(work, "orders.json")
		writeFile(t, file, run(t, 30*time.Second, "", d.adminArgs("client-credential", "--name", "orders", "--groups", "orders-*", "--topics", "de*")...))
		consume := func(group string) (string, string, error) {
			return cliResult(t, "consume", "--group", group, "--topic", "demo", "--format", "json",
				"--credential-file", file, "--coordinator", d.coordinator, "--gateways", d.gateway, "--max-records", "1")
		}
		if out, stderr, err := consume("orders-eu"); err != nil || len(parseConsumed(t, out)) != 1 {
			t.Fatalf("orders-eu under orders-*: %v\n%s%s", err, out, stderr)
		}
		if _, stderr, err := consume("billing"); err == nil || !strings.Contains(stderr, "forbidden") {
			t.Fatalf("billing under orders-*: %v\n%s", err, stderr)
		}
		for _, bad := range [][]string{{"--groups", "or*ders"}, {"--groups", "g", "--topics", "de*mo"}, {"--groups", "**"}} {
			_, stderr, err := cliResult(t, d.adminArgs(append([]string{"client-credential", "--name", "bad"}, bad...)...)...)
			if err == nil || !strings.Contains(stderr, "400") || !strings.Contains(stderr, `only at the end`) {
				t.Fatalf("client-credential %v: %v\n%s", bad, err, stderr)
			}
		}
	})

	t.Run("qos_override_replaced_not_merged_and_not_listable", func(t *testing.T) {
		// The override set, and the one ended, as rows of the list: the
		// selector as group=readers, not {"group":"readers"} (newuser12).
		set := d.adminCLI(t, "qos", "--group", "readers", "--max-bytes-per-sec", "4000", "-o", "table")
		mustMatch(t, "qos -o table", set, `ID\s+SELECTOR\s+LOG-LEVEL\s+MONITOR\s+MAX-BYTES/S\s+UNTIL`, `group=readers\s+-\s+-\s+4000\s`)
		var merged struct {
			LogLevel       string `json:"log_level"`
			MaxBytesPerSec int64  `json:"max_bytes_per_sec"`
		}
		d.adminJSON(t, &merged, "qos", "--group", "readers", "--log-level", "debug")
		if merged.LogLevel != "debug" || merged.MaxBytesPerSec != 4000 {
			t.Fatalf("second override of the same selector: %+v, want debug and 4000 B/s", merged)
		}
		var list struct {
			Overrides []json.RawMessage `json:"overrides"`
		}
		d.adminJSON(t, &list, "qos", "list")
		table := d.adminCLI(t, "qos", "list", "-o", "table")
		if len(list.Overrides) != 1 {
			t.Fatalf("qos list: %d overrides, want 1 (merged)", len(list.Overrides))
		}
		mustMatch(t, "qos list -o table", table, `ID\s+SELECTOR\s+LOG-LEVEL`, `group=readers\s+debug\s+-\s+4000\s`)
	})

	t.Run("lease_or_revoke_on_unknown_group_creates_it", func(t *testing.T) {
		for _, args := range [][]string{
			{"lease", "nosuch", "demo", "1", "--holder", "x", "--ttl", "1m"},
			{"revoke", "nosuch", "demo", "1"},
			{"offsets", "reset", "nosuch", "demo", "1", "--to", "earliest"},
		} {
			_, stderr, err := cliResult(t, d.adminArgs(args...)...)
			if err == nil || !strings.Contains(stderr, "404") || !strings.Contains(stderr, "not_found") {
				t.Fatalf("admin %v: %v\n%s", args, err, stderr)
			}
		}
		if groups := d.adminCLI(t, "groups"); strings.Contains(groups, "nosuch") {
			t.Fatalf("admin actions on an unknown group created it: %s", groups)
		}
	})

	t.Run("lease_ttl_uncapped", func(t *testing.T) {
		// The coordinator's 400 is worded as the flag typed (ttlflags.go):
		// a usage error, exit 2.
		_, stderr, err := cliResult(t, d.adminArgs("lease", "readers", "demo", "1", "--holder", "x", "--ttl", "2777h")...) // 10^10 ms
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(stderr, "--ttl 2777h is above coordinator.groups.limits.lease_ttl_max (24h0m0s)") {
			t.Fatalf("a 10^10 ms lease: %v\n%s", err, stderr)
		}
	})

	t.Run("outside_lease_holder_cannot_commit", func(t *testing.T) {
		var lease struct {
			Capability string `json:"capability"`
			Outside    bool   `json:"outside"`
		}
		run(t, 30*time.Second, printf("x", "y"), "produce", "--topic", "demo", "--partition", "1",
			"--coordinator", d.coordinator, "--gateways", d.gateway, "--token-file", filepath.Join(d.dataDir, "credentials.json"))
		d.adminJSON(t, &lease, "lease", "readers", "demo", "1", "--holder", "backfill", "--ttl", "5m")
		if !lease.Outside || lease.Capability == "" {
			t.Fatalf("outside lease: %+v", lease)
		}
		body := `{"offsets":[{"topic":"demo","partition":1,"offset":2}]}`
		if status := httpJSONBody(t, "POST", d.coordinator+"/v1/groups/readers/commit", lease.Capability, body, nil); status != 200 {
			t.Fatalf("outside holder's commit with its capability: %d", status)
		}
		var offsets struct {
			Offsets []struct {
				Partition int32 `json:"partition"`
				Offset    int64 `json:"offset"`
			} `json:"offsets"`
		}
		httpJSONBody(t, "GET", d.coordinator+"/v1/groups/readers/offsets", d.secret(t, "admin_token"), "", &offsets)
		if !slices.Contains(offsets.Offsets, struct {
			Partition int32 `json:"partition"`
			Offset    int64 `json:"offset"`
		}{1, 2}) {
			t.Fatalf("offsets after the outside commit: %+v", offsets)
		}
		// Leasing it to another holder is refused, naming backfill and
		// --force (newuser4 #6: it silently fenced backfill's lease);
		// --force moves it.
		_, stderr, err := cliResult(t, d.adminArgs("lease", "readers", "demo", "1", "--holder", "other", "--ttl", "5m")...)
		if err == nil || !strings.Contains(stderr, `leased to "backfill"`) ||
			!strings.Contains(stderr, "pass --force to move it: capgate admin lease readers demo 1 --holder other --force") {
			t.Fatalf("lease of backfill's partition to another holder: %v\n%s", err, stderr)
		}
		var moved struct {
			Holder string `json:"holder"`
		}
		d.adminJSON(t, &moved, "lease", "readers", "demo", "1", "--holder", "other", "--ttl", "5m", "--force")
		if moved.Holder != "other" {
			t.Fatalf("forced lease: %+v", moved)
		}
		d.adminCLI(t, "revoke", "readers", "demo", "1", "--reason", "backfill done")
	})

	t.Run("no_offset_reset_or_delete_group_command", func(t *testing.T) {
		table := d.adminCLI(t, "offsets", "reset", "readers", "demo", "--to", "latest", "-o", "table")
		mustMatch(t, "offsets reset -o table", table, `GROUP\s+TOPIC\s+PARTITION\s+NEW-OFFSET`, `readers\s+demo\s+0\s+3\b`)
		var reset struct {
			Reset []struct {
				Offset int64 `json:"offset"`
			} `json:"reset"`
		}
		d.adminJSON(t, &reset, "offsets", "reset", "readers", "demo", "0", "--to", "1")
		if len(reset.Reset) != 1 || reset.Reset[0].Offset != 1 {
			t.Fatalf("reset to 1: %+v", reset)
		}
		_, stderr, err := cliResult(t, d.adminArgs("offsets", "reset", "readers", "demo", "0", "--to", "99")...)
		if err == nil || !strings.Contains(stderr, "416") {
			t.Fatalf("reset beyond the log end: %v\n%s", err, stderr)
		}
		// A live member (joined over HTTP with a long session, so nothing
		// rejoins behind the test's back): delete is refused, --force
		// revokes it first.
		var joined struct {
			MemberToken string `json:"member_token"`
		}
		status := httpJSONBody(t, "POST", d.coordinator+"/v1/groups/live/join", d.secret(t, "client_credential"),
			`{"topics":["demo"],"session_timeout_ms":300000}`, &joined)
		if status != 200 || joined.MemberToken == "" {
			t.Fatalf("join: %d", status)
		}
		_, stderr, err = cliResult(t, d.adminArgs("group", "delete", "live")...)
		if err == nil || !strings.Contains(stderr, "409") || !strings.Contains(stderr, "force") {
			t.Fatalf("delete of a group with a live member: %v\n%s", err, stderr)
		}
		var deleted struct {
			MembersRevoked int `json:"members_revoked"`
		}
		d.adminJSON(t, &deleted, "group", "delete", "live", "--force")
		if deleted.MembersRevoked != 1 {
			t.Fatalf("forced delete: %+v", deleted)
		}
		if _, stderr, err := cliResult(t, d.adminArgs("group", "describe", "live")...); err == nil || !strings.Contains(stderr, "404") {
			t.Fatalf("describe after delete: %v\n%s", err, stderr)
		}
		if status := httpJSONBody(t, "POST", d.coordinator+"/v1/groups/live/heartbeat", joined.MemberToken, `{}`, nil); status != 409 {
			t.Fatalf("the revoked member's heartbeat: %d, want 409", status)
		}
	})

	t.Run("admin_output_raw_json_only", func(t *testing.T) {
		describe := d.adminCLI(t, "group", "readers", "-o", "table")
		mustMatch(t, "group -o table", describe, `(?m)^GROUP\s+readers$`, `(?m)^TOTAL-LAG\s+`,
			`TOPIC\s+PARTITION\s+STATE\s+EPOCH\s+CURRENT-OFFSET\s+LOG-END-OFFSET\s+LAG\s+OWNER`, `demo\s+0\s+\w+\s+\d+\s+1\s+3\s+2\s`)
		var piped map[string]any
		d.adminJSON(t, &piped, "group", "readers")
		if piped["group"] != "readers" {
			t.Fatalf("piped describe: %v", piped)
		}
		// On a terminal (script(1) gives the command a pseudo-terminal),
		// tables without asking.
		args := append([]string{capgate}, d.adminArgs("groups")...)
		cmd := exec.Command("script", "-qec", strings.Join(args, " "), "/dev/null")
		cmd.Env = stack.CleanEnv()
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("script: %v (script(1) is in util-linux/bsdutils)\n%s", err, out)
		}
		mustMatch(t, "admin groups on a terminal", string(out), `(?m)^GROUP\s+STATE\s+MEMBERS\s+PARTITIONS\s+LAG\s*\r?$`, `(?m)^readers\s+Empty\s+0\s+12\s+\d+\s*\r?$`)
	})

	t.Run("revoke_reason_dropped_and_admin_actions_not_logged", func(t *testing.T) {
		var audit struct {
			Entries []struct {
				Who, Action, Target, Reason, Result string
			} `json:"entries"`
		}
		d.adminJSON(t, &audit, "audit", "--limit", "50")
		found := false
		for _, e := range audit.Entries {
			found = found || e.Action == "partition_revoke" && e.Target == "readers/demo/1" && e.Reason == "backfill done" && e.Result == "ok" && strings.HasPrefix(e.Who, "token:")
		}
		if !found {
			t.Fatalf("the revoke with its reason is not in the audit log: %+v", audit.Entries)
		}
		logs := d.stderr.String()
		mustMatch(t, "coordinator log", logs, `admin action.*"action": "partition_revoke".*"reason": "backfill done"`)
		if strings.Contains(logs, d.secret(t, "admin_token")) {
			t.Fatal("the admin token is in the logs")
		}
	})

	t.Run("no_version_command", func(t *testing.T) {
		var v map[string]any
		if err := json.Unmarshal([]byte(run(t, 10*time.Second, "", "version")), &v); err != nil || v["version"] == "" || !strings.HasPrefix(v["go_version"].(string), "go1.") || v["commit"] == "" {
			t.Fatalf("version: %v %v", v, err)
		}
		mustMatch(t, "version -o table", run(t, 10*time.Second, "", "version", "-o", "table"), `(?m)^VERSION\s+\S+`, `(?m)^COMMIT\s+\S+`, `(?m)^GO\s+go1\.`)
	})

	// newuser3 #6: a reset of a partition leased outside the group ended
	// the lease without a word, while the help promised a regrant.
	t.Run("offsets_reset_silently_ended_an_outside_lease", func(t *testing.T) {
		if status := httpJSONBody(t, "PUT", d.coordinator+"/v1/admin/groups/leased/config", d.secret(t, "admin_token"), `{"max_moves_per_second":1}`, nil); status != 200 {
			t.Fatalf("create group leased: %d", status)
		}
		var lease struct {
			Until string `json:"until"`
		}
		d.adminJSON(t, &lease, "lease", "leased", "demo", "2", "--holder", "batch", "--ttl", "1h")
		committed := func() string { return d.adminCLI(t, "offsets", "leased") }
		before := committed()
		// The whole topic: refused before any partition is reset.
		_, stderr, err := cliResult(t, d.adminArgs("offsets", "reset", "leased", "demo", "--to", "earliest")...)
		if err == nil || !strings.Contains(stderr, "nothing reset") || !strings.Contains(stderr, "2: batch until "+lease.Until) || !strings.Contains(stderr, "--force") {
			t.Fatalf("topic reset with a leased partition: %v\n%s", err, stderr)
		}
		// The partition: the coordinator's 409, with the CLI's next steps.
		_, stderr, err = cliResult(t, d.adminArgs("offsets", "reset", "leased", "demo", "2", "--to", "earliest")...)
		if err == nil || !strings.Contains(stderr, "409") || !strings.Contains(stderr, `leased to "batch"`) ||
			!strings.Contains(stderr, "capgate admin revoke leased demo 2, or pass --force") {
			t.Fatalf("reset of the leased partition: %v\n%s", err, stderr)
		}
		if after := committed(); after != before {
			t.Fatalf("refused resets moved offsets:\n%s\n→\n%s", before, after)
		}
		if p := describePartition(t, d, "leased", 2); p.Lease == nil || p.Lease.Holder != "batch" {
			t.Fatalf("the lease after refused resets: %+v", p.Lease)
		}
		table := d.adminCLI(t, "offsets", "reset", "leased", "demo", "2", "--to", "earliest", "--force", "-o", "table")
		mustMatch(t, "forced reset -o table", table, `GROUP\s+TOPIC\s+PARTITION\s+NEW-OFFSET\s+LEASE-ENDED`,
			`leased\s+demo\s+2\s+0\s+batch \(until `+regexp.QuoteMeta(lease.Until)+`\)`)
		if p := describePartition(t, d, "leased", 2); p.Lease != nil {
			t.Fatalf("the lease after the forced reset: %+v", p.Lease)
		}
	})
}

// describePartition is partition p of demo in group's describe.
func describePartition(t *testing.T, d *devProcess, group string, p int32) coordinator.PartitionView {
	t.Helper()
	var desc coordinator.GroupDescription
	d.adminJSON(t, &desc, "group", group)
	for _, v := range desc.Partitions {
		if v.Topic == "demo" && v.Partition == p {
			return v
		}
	}
	t.Fatalf("group %s has no demo/%d", group, p)
	return coordinator.PartitionView{}
}

// secret reads one key of d's credentials.json.
func (d *devProcess) secret(t *testing.T, key string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(d.dataDir, "credentials.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	v, _ := m[key].(string)
	if v == "" {
		t.Fatalf("credentials.json has no %s", key)
	}
	return v
}

// writeFile writes a file only its owner reads (it holds a credential).
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// httpJSONBody sends body (none when "") with a bearer token and decodes a
// 200 answer into out (may be nil); it returns the status.
func httpJSONBody(t *testing.T, method, url, token, body string, out any) int {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == 200 && out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v\n%s", method, url, err, b)
		}
	}
	return resp.StatusCode
}
