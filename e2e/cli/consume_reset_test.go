package cli_test

import (
	"strings"
	"testing"
	"time"
)

// TestConsumeOffsetsResetOnALiveGroupIsNoWarning: `capgate admin offsets
// reset GROUP demo --to latest` on a group a `capgate consume` reads is
// routine: the coordinator fences and grants every partition again at
// once, so the consumer's release of the old epoch is refused
// stale_epoch and nothing waits for it. The consumer says so at info
// ("release not needed: the partition is at a newer epoch already") and
// warns about nothing — it printed one WARN per partition, "release commit
// failed; the coordinator moves the partition after its handoff
// timeout", a wait that never came.
func TestConsumeOffsetsResetOnALiveGroupIsNoWarning(t *testing.T) {
	t.Parallel()
	d := startDev(t, t.TempDir())
	p := startConsume(t, d.consumeArgs("live", "--log-level", "info")...)
	eventually(t, 30*time.Second, "the consumer holds every partition", func() (bool, string) {
		if ok, why := p.running(); !ok {
			return false, why
		}
		var g groupView
		if d.admin(t, "GET", "/v1/admin/groups/live", &g) != 200 || len(g.Members) != 1 {
			return false, "no member yet"
		}
		for _, part := range g.Partitions {
			if part.Owner == "" || part.State != "owned" {
				return false, part.Topic + " not owned yet"
			}
		}
		return true, ""
	})
	d.adminCLI(t, "offsets", "reset", "live", "demo", "--to", "latest")
	want := "release not needed: the partition is at a newer epoch already"
	eventually(t, 30*time.Second, "the consumer released every partition of the old epoch", func() (bool, string) {
		if ok, why := p.running(); !ok {
			return false, why
		}
		stderr := p.stderr.String()
		if strings.Contains(stderr, "release commit failed") {
			t.Fatalf("a routine offsets reset made the consumer warn of a handoff timeout:\n%s", stderr)
		}
		return strings.Count(stderr, want) >= 12, stderr
	})
	stderr := p.stderr.String()
	if strings.Contains(stderr, "WARN") || strings.Contains(stderr, "handoff timeout") {
		t.Fatalf("a routine offsets reset made the consumer warn:\n%s", stderr)
	}
	p.interrupt(t)
	d.stop(true)
}
