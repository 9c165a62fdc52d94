package harness

import (
	"fmt"
	"testing"
	"time"
)

// Wait is the generous deadline of the suites' waits: they share a
// loaded 2-core machine. Never an assertion about speed.
const Wait = 30 * time.Second

// Owners maps each member id to the partitions it owns in group, or says
// why the group is not settled with members members (every partition
// owned, none revoking, floor/ceil balance).
func (c *Cluster) Owners(group string, members int) (map[string][]int32, string) {
	d, err := c.Describe(group)
	if err != nil {
		return nil, err.Error()
	}
	if len(d.Members) != members {
		return nil, fmt.Sprintf("%d members, want %d", len(d.Members), members)
	}
	out := map[string][]int32{}
	for _, p := range d.Partitions {
		if p.State != "owned" {
			return nil, fmt.Sprintf("partition %d is %s (epoch %d)", p.Partition, p.State, p.Epoch)
		}
		out[p.Owner] = append(out[p.Owner], p.Partition)
	}
	floor := int(c.Partitions()) / members
	for _, m := range d.Members {
		if n := len(out[m.ID]); n < floor || n > floor+1 {
			return nil, fmt.Sprintf("member %s owns %d", m.ID, n)
		}
	}
	return out, ""
}

// WaitSettled waits until group is settled with members members and
// returns the ownership.
func (c *Cluster) WaitSettled(t testing.TB, group string, members int) map[string][]int32 {
	t.Helper()
	var own map[string][]int32
	Eventually(t, Wait, fmt.Sprintf("%s settled with %d members", group, members), func() (bool, string) {
		var why string
		own, why = c.Owners(group, members)
		return own != nil, why
	})
	return own
}

// WaitFlowing waits until group got n more deliveries than now.
func (c *Cluster) WaitFlowing(t testing.TB, group string, n int) {
	t.Helper()
	count := func() int {
		s := c.Log.Snapshot()
		k := 0
		for _, d := range s.Deliveries {
			if d.Key.Group == group {
				k++
			}
		}
		return k
	}
	start := count()
	Eventually(t, Wait, fmt.Sprintf("%d more deliveries to %s", n, group), func() (bool, string) {
		got := count() - start
		return got >= n, fmt.Sprintf("%d so far", got)
	})
}

// Finish stops the producer, waits until group delivered everything and
// runs every checker.
func (c *Cluster) Finish(t testing.TB, prod *Producer, group string) Snapshot {
	t.Helper()
	prod.Stop()
	if n, err := prod.Failures(); n > 0 {
		t.Logf("%d produce calls failed (not acknowledged, not counted), last: %v", n, err)
	}
	c.WaitDelivered(t, group, Wait)
	s := c.Check(t)
	t.Logf("%d records produced and delivered (%d deliveries)", prod.Count(), len(s.Deliveries))
	return s
}
