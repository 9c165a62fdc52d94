package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/internal/stack"
)

// TestProduceFailureSaysWhatWasWritten: a `capgate produce -o json` of
// lines one of which Kafka cannot take (1.5 MB, over the producer's
// 1 MB limit) writes the lines before it, then fails (exit 1, the
// record_too_large error). What was written is still summed up —
// "produced 1 record to demo/3 (offset 0)" on stderr and the JSON object
// on stdout — so a script knows where to resume; it printed neither, only
// "after 1 records" in the error (newuser4 #12). The error names the
// operation once (it said "produce demo/3" twice; newuser11).
func TestProduceFailureSaysWhatWasWritten(t *testing.T) {
	t.Parallel()
	d := startDev(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, capgate, d.produceArgs("--partition", "3", "--batch-records", "1", "-o", "json")...)
	cmd.Stdin = strings.NewReader("first\n" + strings.Repeat("x", 1_500_000) + "\nlast\n")
	cmd.Env = stack.CleanEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(stderr.String(), "record_too_large") {
		t.Fatalf("produce of a 1.5 MB line: %v, stderr %q; want exit 1 with record_too_large", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "produced 1 record to demo/3 (offset 0)\n") ||
		!strings.Contains(stderr.String(), "after 1 record:") {
		t.Errorf("stderr %q, want the summary of the record written before the failure", stderr.String())
	}
	// The error names the operation once: it read "produce demo/3 after
	// 1 record: client: produce demo/3: record_too_large ..." (newuser11).
	if n := strings.Count(stderr.String(), "capgate: produce demo/3"); n != 1 || strings.Contains(stderr.String(), "client: produce") {
		t.Errorf("stderr %q: want the failure as one \"capgate: produce demo/3 after 1 record: record_too_large ...\"", stderr.String())
	}
	var wrote struct {
		Records    int `json:"records"`
		Partitions []struct {
			Partition  int32 `json:"partition"`
			BaseOffset int64 `json:"base_offset"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &wrote); err != nil || wrote.Records != 1 || len(wrote.Partitions) != 1 ||
		wrote.Partitions[0].Partition != 3 || wrote.Partitions[0].BaseOffset != 0 {
		t.Fatalf("produce -o json printed %q (%v) on failing after one record, want {records: 1, partitions: [demo/3]}", stdout.String(), err)
	}
	got := values(parseConsumed(t, run(t, 30*time.Second, "", d.consumeArgs("failed", "--offset", "start", "--idle-exit", "1500ms")...)))
	if strings.Join(got, ",") != "first" {
		t.Errorf("demo holds %q, want only first: the summary must be what was written", got)
	}
	d.stop(true)
}
