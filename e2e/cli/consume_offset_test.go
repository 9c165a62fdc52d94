package cli_test

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestConsumeOffsetStartEnd: `capgate consume --offset start|end` (-o)
// against `capgate dev`, as rpk's -o and Kafka's auto.offset.reset: it
// places only the partitions the group has no committed offset for, and
// never changes the group's stored settings. demo/0 holds old0..old9
// before any consumer runs.
func TestConsumeOffsetStartEnd(t *testing.T) {
	t.Parallel()
	d := startDev(t, t.TempDir())
	run(t, 20*time.Second, numberedLines("old", 10), d.produceArgs("--partition", "0")...)

	// A new group (offset_reset earliest, the default) with -o end prints
	// none of the old records. It commits the end it started at (10),
	// which is also how this test knows it sits there; then a record
	// produced after it joined is printed, and only that one.
	end := startConsume(t, d.consumeArgs("from-end", "-o", "end", "--commit-interval", "100ms")...)
	eventually(t, 30*time.Second, "the -o end consumer committed the end of demo/0", func() (bool, string) {
		if ok, why := end.running(); !ok {
			return false, why
		}
		return committed(t, d, "from-end", 0) == 10, fmt.Sprintf("demo/0 committed %d; printed %q", committed(t, d, "from-end", 0), end.stdout.String())
	})
	run(t, 20*time.Second, "new0\n", d.produceArgs("--partition", "0")...)
	eventually(t, 30*time.Second, "the -o end consumer printed the record produced after it joined", func() (bool, string) {
		return end.printed() >= 1, fmt.Sprintf("printed %q", end.stdout.String())
	})
	end.interrupt(t)
	if got := values(parseConsumed(t, end.stdout.String())); strings.Join(got, ",") != "new0" {
		t.Errorf("-o end printed %q, want only new0 (none of old0..old9)", got)
	}
	if reset := d.groupOffsetReset(t, "from-end"); reset != "earliest" {
		t.Errorf("group from-end has offset_reset %q after a -o end consumer, want its own earliest", reset)
	}

	// A group whose own offset_reset is latest, consumed with -o start,
	// prints everything from the log's start.
	d.adminCLI(t, "config", "from-start", "--offset-reset", "latest")
	start := run(t, 60*time.Second, "", d.consumeArgs("from-start", "-o", "start", "--max-records", "11", "--idle-exit", "20s")...)
	if got, want := values(parseConsumed(t, start)), numberedLines("old", 10)+"new0\n"; strings.Join(got, "\n")+"\n" != want {
		t.Errorf("-o start printed %q, want old0..old9 and new0", got)
	}
	if reset := d.groupOffsetReset(t, "from-start"); reset != "latest" {
		t.Errorf("group from-start has offset_reset %q after a -o start consumer, want its own latest", reset)
	}
}

// TestConsumeOffsetEndResumesFromCommits: a group with a committed offset
// ignores --offset end and resumes from its commit (Kafka's
// auto.offset.reset applies only without one).
func TestConsumeOffsetEndResumesFromCommits(t *testing.T) {
	t.Parallel()
	d := startDev(t, t.TempDir())
	run(t, 20*time.Second, numberedLines("r", 10), d.produceArgs("--partition", "0")...)
	first := run(t, 30*time.Second, "", d.consumeArgs("resume", "--max-records", "4")...)
	if got := values(parseConsumed(t, first)); strings.Join(got, ",") != "r0,r1,r2,r3" {
		t.Fatalf("first run printed %q, want r0..r3", got)
	}
	next := run(t, 60*time.Second, "", d.consumeArgs("resume", "-o", "end", "--max-records", "6", "--idle-exit", "20s")...)
	if got := values(parseConsumed(t, next)); strings.Join(got, ",") != "r4,r5,r6,r7,r8,r9" {
		t.Fatalf("-o end on a group committed at 4 printed %q, want r4..r9 (the commit wins)", got)
	}
}

// TestConsumeOffsetNumberIsAUsageError: the real binary refuses an offset
// number (rpk's -o 42, -o -3) and other words with exit status 2 and a
// message naming what a group consumer takes, before joining anything.
func TestConsumeOffsetNumberIsAUsageError(t *testing.T) {
	t.Parallel()
	for _, value := range []string{"42", "-3", "oldest"} {
		args := []string{"consume", "--group", "g", "--topic", "demo", "--credential", "x", "--coordinator", "http://127.0.0.1:1", "--gateways", "http://127.0.0.1:1", "-o", value}
		_, stderr, err := cliResult(t, args...)
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(stderr, "start or end") {
			t.Errorf("consume -o %s: %v, stderr %q; want exit status 2 naming start or end", value, err, stderr)
		}
	}
}

// numberedLines is prefix0..prefix(n-1), one a line.
func numberedLines(prefix string, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%s%d\n", prefix, i)
	}
	return b.String()
}

// committed is the group's committed offset of demo/partition (-1: none,
// or no such group yet).
func committed(t *testing.T, d *devProcess, group string, partition int32) int64 {
	t.Helper()
	var g groupView
	if status := d.admin(t, "GET", "/v1/admin/groups/"+group, &g); status != 200 {
		return -1
	}
	for _, p := range g.Partitions {
		if p.Topic == "demo" && p.Partition == partition && p.Committed != nil {
			return *p.Committed
		}
	}
	return -1
}

// groupOffsetReset is the group's stored offset_reset setting.
func (d *devProcess) groupOffsetReset(t *testing.T, group string) string {
	t.Helper()
	var g struct {
		Config struct {
			OffsetReset string `json:"offset_reset"`
		} `json:"config"`
	}
	if status := d.admin(t, "GET", "/v1/admin/groups/"+group, &g); status != 200 {
		t.Fatalf("admin group %s: %d", group, status)
	}
	return g.Config.OffsetReset
}

// TestOffsetsResetToStartAndEnd: `capgate admin offsets reset G T P --to
// start|end` moves the group's committed offset to the log's start or
// end, as `--to earliest|latest` do — the words `capgate consume -o`
// and rpk's `group seek --to` take; they were refused "want earliest,
// latest or an offset" (newuser4 #7).
func TestOffsetsResetToStartAndEnd(t *testing.T) {
	t.Parallel()
	d := startDev(t, t.TempDir())
	run(t, 20*time.Second, numberedLines("s", 5), d.produceArgs("--partition", "0")...)
	run(t, 30*time.Second, "", d.consumeArgs("seek", "--max-records", "5")...)
	for _, c := range []struct {
		to   string
		want int64
	}{{"start", 0}, {"end", 5}, {"beginning", 0}} {
		d.adminCLI(t, "offsets", "reset", "seek", "demo", "0", "--to", c.to)
		if got := committed(t, d, "seek", 0); got != c.want {
			t.Errorf("offsets reset --to %s: demo/0 committed %d, want %d", c.to, got, c.want)
		}
	}
}
