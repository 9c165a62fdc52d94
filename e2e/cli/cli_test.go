package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// consumed is one line of `capgate consume --format json`.
type consumed struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Offset    int64   `json:"offset"`
	Key       *string `json:"key"`
	Value     *string `json:"value"`
}

func parseConsumed(t *testing.T, out string) []consumed {
	t.Helper()
	var records []consumed
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var r consumed
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("consume printed a line that is not a JSON record: %q: %v", line, err)
		}
		records = append(records, r)
	}
	return records
}

// consumeArgs are the flags that point `capgate consume` at d.
func (d *devProcess) consumeArgs(group string, extra ...string) []string {
	return append([]string{"consume", "--group", group, "--topic", "demo", "--format", "json",
		"--credential-file", filepath.Join(d.dataDir, "credentials.json"),
		"--coordinator", d.coordinator, "--gateways", d.gateway}, extra...)
}

// kcatProduce writes lines to one partition of the embedded broker.
func kcatProduce(t *testing.T, kcat, broker string, partition int, keyed bool, lines []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	args := []string{"-b", broker, "-t", "demo", "-p", fmt.Sprint(partition), "-P"}
	if keyed {
		args = append(args, "-K", ":")
	}
	cmd := exec.CommandContext(ctx, kcat, args...)
	cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kcat %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestKcatProduceConsume writes records straight into the embedded Kafka
// with kcat and reads every one back through the gateway with capgate
// consume: exactly that set, keys included; a second run of the same
// group finds nothing left (the first committed and left cleanly).
func TestKcatProduceConsume(t *testing.T) {
	// Not skipped when kcat is missing: a test that does not run on some
	// machine is one that cannot fail there. .ci/run installs it.
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatal("kcat is not installed (apt-get install kcat; .ci/run does)")
	}
	d := startDev(t, t.TempDir())
	want := map[string]string{} // value -> key ("" for none)
	for _, p := range []int{0, 5, 11} {
		var lines []string
		for i := range 10 {
			v := fmt.Sprintf("p%d-v%d", p, i)
			want[v] = ""
			lines = append(lines, v)
		}
		kcatProduce(t, kcat, d.broker, p, false, lines)
	}
	var keyed []string
	for i := range 5 {
		v := fmt.Sprintf("p7-v%d", i)
		want[v] = fmt.Sprintf("k%d", i)
		keyed = append(keyed, want[v]+":"+v)
	}
	kcatProduce(t, kcat, d.broker, 7, true, keyed)

	records := parseConsumed(t, run(t, 30*time.Second, "", d.consumeArgs("kcat-check", "--max-records", fmt.Sprint(len(want)))...))
	got := map[string]string{}
	for _, r := range records {
		if r.Value == nil {
			t.Fatalf("record without a value: %+v", r)
		}
		if _, dup := got[*r.Value]; dup {
			t.Errorf("value %q consumed twice", *r.Value)
		}
		key := ""
		if r.Key != nil {
			key = *r.Key
		}
		got[*r.Value] = key
		if want := fmt.Sprintf("p%d-", r.Partition); !strings.HasPrefix(*r.Value, want) {
			t.Errorf("value %q read from partition %d", *r.Value, r.Partition)
		}
	}
	if !mapsEqual(got, want) {
		t.Fatalf("consumed %d records %v, want %d %v", len(got), got, len(want), want)
	}
	again := parseConsumed(t, run(t, 30*time.Second, "", d.consumeArgs("kcat-check", "--idle-exit", "1s")...))
	if len(again) != 0 {
		t.Fatalf("the group's second run read %d records again: %+v", len(again), again)
	}
	d.stop(true)
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// partitionView is the part of `capgate admin group` this test reads.
type partitionView struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Committed *int64 `json:"committed"`
}

// TestRestartKeepsState stops capgate dev and starts it again on the same
// data directory (on new ports): the credentials are the same, the
// records are there, and the group's committed offset survived, so the
// group resumes exactly after what it consumed.
func TestRestartKeepsState(t *testing.T) {
	dir := t.TempDir()
	d := startDev(t, dir)
	credsPath := filepath.Join(dir, "credentials.json")
	creds, err := os.ReadFile(credsPath)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(credsPath); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("credentials.json mode: %v %v, want 0600", info.Mode().Perm(), err)
	}
	produce := func(d *devProcess, lines string) {
		run(t, 20*time.Second, lines, "produce", "--topic", "demo", "--partition", "2",
			"--token-file", credsPath, "--coordinator", d.coordinator, "--gateways", d.gateway)
	}
	produce(d, "one\ntwo\nthree\n")
	first := parseConsumed(t, run(t, 30*time.Second, "", d.consumeArgs("restart", "--max-records", "3")...))
	if got := values(first); !slices.Equal(got, []string{"one", "two", "three"}) {
		t.Fatalf("first run consumed %q", got)
	}
	produce(d, "four\nfive\n")
	d.stop(true)

	d = startDev(t, dir)
	if again, err := os.ReadFile(credsPath); err != nil || !bytes.Equal(again, creds) {
		t.Fatalf("credentials.json changed across the restart (err %v)", err)
	}
	var group struct {
		Partitions []partitionView `json:"partitions"`
	}
	out := run(t, 20*time.Second, "", "admin", "--coordinator", d.coordinator, "--token-file", credsPath, "group", "restart")
	if err := json.Unmarshal([]byte(out), &group); err != nil {
		t.Fatalf("admin group: %v\n%s", err, out)
	}
	var committed *int64
	for _, p := range group.Partitions {
		if p.Topic == "demo" && p.Partition == 2 {
			committed = p.Committed
		}
	}
	if committed == nil || *committed != 3 {
		t.Fatalf("committed offset of demo/2 after the restart: %v, want 3\n%s", committed, out)
	}
	second := parseConsumed(t, run(t, 30*time.Second, "", d.consumeArgs("restart", "--idle-exit", "1500ms")...))
	if got := values(second); !slices.Equal(got, []string{"four", "five"}) {
		t.Fatalf("after the restart the group consumed %q, want [four five]", got)
	}
	d.stop(true)
}

func values(records []consumed) []string {
	out := make([]string, 0, len(records))
	for _, r := range records {
		if r.Value != nil {
			out = append(out, *r.Value)
		}
	}
	return out
}
