package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capgate/capgate/internal/stack"
)

// TestKcatShortFlagsAndProduceJSON: an rpk/kcat user's flags work —
// `produce -t demo -p 3 -K : -o json` writes a keyed record and prints
// what it wrote as JSON on stdout (topic, records, per partition the
// base offset and count) and "produced 1 record" (singular) on stderr;
// `consume -g G -t demo -o beginning -n 1 -f json` reads it back. Before,
// -t, -p, -K, -g, -n and -f were unknown shorthands, `-o beginning` was
// refused, produce had no JSON output and said "produced 1 records".
func TestKcatShortFlagsAndProduceJSON(t *testing.T) {
	t.Parallel()
	d := startDev(t, t.TempDir())
	creds := filepath.Join(d.dataDir, "credentials.json")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, capgate, "produce", "-t", "demo", "-p", "3", "-K", ":", "-o", "json",
		"--token-file", creds, "--coordinator", d.coordinator, "--gateways", d.gateway)
	cmd.Stdin, cmd.Env = strings.NewReader("k1:hello\n"), stack.CleanEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("produce with kcat's flags: %v\n%s", err, stderr.String())
	}
	var wrote struct {
		Topic      string `json:"topic"`
		Records    int    `json:"records"`
		Partitions []struct {
			Partition  int32 `json:"partition"`
			BaseOffset int64 `json:"base_offset"`
			LastOffset int64 `json:"last_offset"`
			Count      int   `json:"count"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &wrote); err != nil || wrote.Topic != "demo" || wrote.Records != 1 ||
		len(wrote.Partitions) != 1 || wrote.Partitions[0].Partition != 3 || wrote.Partitions[0].Count != 1 ||
		wrote.Partitions[0].LastOffset != wrote.Partitions[0].BaseOffset {
		t.Fatalf("produce -o json printed %q (%v), want demo, 1 record, partition 3", stdout.String(), err)
	}
	base := wrote.Partitions[0].BaseOffset
	if !strings.Contains(stderr.String(), "produced 1 record to demo/3 (offset ") {
		t.Errorf("stderr %q, want \"produced 1 record to demo/3 (offset …)\"", stderr.String())
	}

	got := parseConsumed(t, run(t, 30*time.Second, "", "consume", "-g", "kcat", "-t", "demo", "-o", "beginning", "-n", "1", "-f", "json",
		"--credential-file", creds, "--coordinator", d.coordinator, "--gateways", d.gateway))
	if len(got) != 1 || got[0].Partition != 3 || got[0].Offset != base || got[0].Key == nil || *got[0].Key != "k1" ||
		got[0].Value == nil || *got[0].Value != "hello" {
		t.Fatalf("consume with kcat's flags read %+v, want k1:hello at demo/3 offset %d", got, base)
	}
	d.stop(true)
}

// TestProduceInterruptedWhileWaitingOnStdin: Ctrl-C of a `capgate
// produce` waiting for its first line says "interrupted, nothing sent"
// and exits 1 (the CLI's status for a failure of the work) — it said
// "produce: context canceled", which read like a failure of the gateway.
func TestProduceInterruptedWhileWaitingOnStdin(t *testing.T) {
	t.Parallel()
	d := startDev(t, t.TempDir())
	cmd := exec.Command(capgate, d.produceArgs("-p", "0")...)
	cmd.Env = stack.CleanEnv()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	// It mints its capability, then reads stdin: once the mint is in the
	// audit log, the interrupt finds it waiting for a line.
	eventually(t, 30*time.Second, "produce minted its capability", func() (bool, string) {
		var audit json.RawMessage
		d.admin(t, "GET", "/v1/admin/audit?limit=50", &audit)
		return strings.Contains(string(audit), "capgate-produce"), string(audit)
	})
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("produce did not exit on SIGINT\n%s", stderr.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(stderr.String(), "capgate: produce: interrupted, nothing sent") ||
		strings.Contains(stderr.String(), "context canceled") {
		t.Fatalf("produce interrupted on stdin: %v (exit %d)\n%s; want exit 1 and \"interrupted, nothing sent\"", err, code, stderr.String())
	}
	d.stop(true)
}

// TestConsumeKcatFormatString: `capgate consume -f` takes kcat's format
// string as kcat -f does — a kcat user's `-f '%t/%p@%o %k=%s\n'` printed
// "demo/3@0 k1=hello"-style lines; it was refused "want text or json"
// although --help listed -f among kcat's flags that mean the same
// (newuser4 #9). A field kcat has and capgate not is a usage error naming
// the ones it has.
func TestConsumeKcatFormatString(t *testing.T) {
	t.Parallel()
	d := startDev(t, t.TempDir())
	run(t, 30*time.Second, "k1:hello\nk2:world\n", d.produceArgs("-p", "3", "-K", ":")...)
	args := []string{"consume", "-g", "fmt", "-t", "demo", "-o", "start", "-n", "2", "-f", `%t/%p@%o %k=%s (%K/%S)\n`,
		"--credential-file", filepath.Join(d.dataDir, "credentials.json"), "--coordinator", d.coordinator, "--gateways", d.gateway}
	if got, want := run(t, 30*time.Second, "", args...), "demo/3@0 k1=hello (2/5)\ndemo/3@1 k2=world (2/5)\n"; got != want {
		t.Fatalf("consume -f kcat format printed %q, want %q", got, want)
	}
	_, stderr := runFailing(t, 30*time.Second, "consume", "-g", "fmt", "-t", "demo", "-f", "%R", "--credential", "x",
		"--coordinator", d.coordinator, "--gateways", d.gateway)
	if !strings.Contains(stderr, `--format "%R": %R: kcat's fields here are %t topic`) {
		t.Errorf("consume -f %%R: stderr %q, want the fields capgate takes", stderr)
	}
	d.stop(true)
}
