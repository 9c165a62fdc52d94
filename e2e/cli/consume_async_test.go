package cli_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
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
	c := startConsume(t, d.consumeArgs("batches", "--commit-interval", "0")...)
	eventually(t, 30*time.Second, "the printed records committed while consuming", func() (bool, string) {
		if ok, why := c.running(); !ok {
			t.Fatal(why)
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
	if printed := len(parseConsumed(t, c.stdout.String())); printed != n {
		t.Fatalf("printed %d records, want %d", printed, n)
	}
	c.interrupt(t)
	d.stop(true)
}
