package cli_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// TestTwoConsumesPrintNoOffsetTwice is redteam5 #3 through the CLI: a
// `capgate consume` reads a backlog of every partition, a second one joins
// the group while the first is printing, half the partitions move to it.
// Every record is printed exactly once across both: a partition moves only
// after the batch the first was printing is printed and marked (the bug
// released it as soon as the revoke arrived, so the second printed the
// same batch again, at the same time: 914 and 12,507 duplicates). Records
// produced once both settled are printed too, so the second surely
// printed a share of its own.
func TestTwoConsumesPrintNoOffsetTwice(t *testing.T) {
	t.Parallel()
	d := startDev(t, t.TempDir())
	const partitions, backlog, after = 12, 24000, 1200
	run(t, 60*time.Second, numberedLines("b", backlog), d.produceArgs("--batch-records", "1000")...)

	x := startConsume(t, d.consumeArgs("handoff")...)
	eventually(t, 30*time.Second, "the first consume printing", func() (bool, string) {
		if ok, why := x.running(); !ok {
			t.Fatal(why)
		}
		return x.printed() > 0, "nothing printed yet"
	})
	y := startConsume(t, d.consumeArgs("handoff")...)
	eventually(t, 60*time.Second, "both consumes holding half the partitions each", func() (bool, string) {
		for _, c := range []*consumeProcess{x, y} {
			if ok, why := c.running(); !ok {
				t.Fatal(why)
			}
		}
		var g groupView
		if status := d.admin(t, http.MethodGet, "/v1/admin/groups/handoff", &g); status != http.StatusOK {
			return false, fmt.Sprintf("group: %d", status)
		}
		owned := map[string]int{}
		for _, p := range g.Partitions {
			if p.State == "owned" {
				owned[p.Owner]++
			}
		}
		return len(g.Members) == 2 && owned[g.Members[0].ID] == partitions/2 && owned[g.Members[1].ID] == partitions/2,
			fmt.Sprintf("%d members, owned %v", len(g.Members), owned)
	})
	run(t, 60*time.Second, numberedLines("a", after), d.produceArgs("--batch-records", "100")...) // batches of 100: every partition gets some
	eventually(t, 60*time.Second, "every record printed", func() (bool, string) {
		n := x.printed() + y.printed()
		return n >= backlog+after, fmt.Sprintf("%d of %d lines printed (first %d, second %d)", n, backlog+after, x.printed(), y.printed())
	})
	x.interrupt(t)
	y.interrupt(t)

	type at struct {
		partition int32
		offset    int64
	}
	printedBy := map[at]string{}
	twice := 0
	for _, c := range []struct {
		name string
		p    *consumeProcess
	}{{"first", x}, {"second", y}} {
		records := parseConsumed(t, c.p.stdout.String())
		if len(records) == 0 {
			t.Errorf("the %s consume printed nothing", c.name)
		}
		for _, r := range records {
			k := at{r.Partition, r.Offset}
			if by, ok := printedBy[k]; ok {
				if twice++; twice <= 5 {
					t.Errorf("demo/%d offset %d printed by the %s consume and again by the %s", r.Partition, r.Offset, by, c.name)
				}
				continue
			}
			printedBy[k] = c.name
		}
	}
	if twice > 0 || len(printedBy) != backlog+after {
		t.Fatalf("%d records printed twice; %d distinct records printed, want %d", twice, len(printedBy), backlog+after)
	}
	t.Logf("first printed %d, second %d, none twice", x.printed(), y.printed())
	d.stop(true)
}
