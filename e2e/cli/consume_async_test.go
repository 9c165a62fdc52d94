package cli_test

import (
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capgate/capgate/internal/stack"
)

// TestConsumeCommitsEveryBatchInTheBackground: `consume --commit-interval
// 0` commits after every printed batch with CommitAsync (no timed
// commits): the printed offsets are committed while the consumer still
// runs, not only by its release at exit.
func TestConsumeCommitsEveryBatchInTheBackground(t *testing.T) {
	t.Parallel()
	d := startDev(t, t.TempDir())
	const n = 30
	var lines strings.Builder
	for i := range n {
		fmt.Fprintf(&lines, "r%d\n", i)
	}
	run(t, 20*time.Second, lines.String(), d.produceArgs("--partition", "2")...)
	cmd := exec.Command(capgate, d.consumeArgs("batches", "--commit-interval", "0")...)
	cmd.Env = stack.CleanEnv()
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Kill()
		<-exited
	}()
	eventually(t, 30*time.Second, "the printed records committed while consuming", func() (bool, string) {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("consume exited: %v\nstderr:\n%s", err, stderr.String())
		default:
		}
		var g groupView
		if status := d.admin(t, http.MethodGet, "/v1/admin/groups/batches", &g); status != http.StatusOK {
			return false, fmt.Sprintf("group: %d (not joined yet)", status)
		}
		for _, p := range g.Partitions {
			if p.Partition == 2 && p.Committed != nil {
				return *p.Committed == n, fmt.Sprintf("committed %d of %d", *p.Committed, n)
			}
		}
		return false, "nothing committed"
	})
	if printed := len(parseConsumed(t, stdout.String())); printed != n {
		t.Fatalf("printed %d records, want %d", printed, n)
	}
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Fatalf("consume exited with %v\nstderr:\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("consume did not exit on SIGINT\nstderr:\n%s", stderr.String())
	}
	d.stop(true)
}
