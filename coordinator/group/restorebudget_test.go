package group_test

import (
	"fmt"
	"maps"
	"testing"

	"github.com/capgate/capgate/coordinator/assign"
	"github.com/capgate/capgate/coordinator/group"
)

// TestRestoreKeepsPatternsAdmittedAtJoin (review26): a tenant's patterns
// are admitted one by one at their joins, each within
// limits.topic_pattern_steps, up to limits.topic_patterns_per_tenant
// texts; a restore (a restart, a takeover) matches them all within
// 4 × topic_pattern_steps together (8bc3abf). With more than four such
// patterns' worth, the members matched after the budget ran out restore
// with no topics and their groups hand their partitions away — at every
// takeover, with nothing changed: no topic added, no bound lowered. A
// takeover must not move partitions nobody asked to move; a pattern past
// the budget should keep what its member holds (as a topic change's
// stale pattern keeps the topics it had), not lose it.
func TestRestoreKeepsPatternsAdmittedAtJoin(t *testing.T) {
	const limit = 100_000
	w := newWorld(t, func(cfg *group.Config) { cfg.Limits.TopicPatternSteps = limit })
	topics := map[string]int32{}
	for i := range 1000 {
		topics[fmt.Sprintf("team-%04d.service-events", i)] = 1
	}
	w.topics(topics)
	const patterns = 10
	for i := range patterns {
		g := fmt.Sprintf("g%d", i)
		ref := w.nextRef()
		// ~60 steps a name (the leading .*): ~60,000 of the 100,000 over
		// the 1,000 topics; one topic each.
		w.step(group.Join{Ref: ref, Group: g, ClientID: "c", TopicPattern: fmt.Sprintf(`.*-000%d\.service-events`, i),
			Credential: group.Credential{ID: "a"}})
		mustReply[group.JoinReply](t, w, ref)
		w.settle(g)
	}
	before := map[string]map[assign.Partition]string{}
	for i := range patterns {
		g := fmt.Sprintf("g%d", i)
		if before[g] = w.owners(g); len(before[g]) != 1 {
			t.Fatalf("%s before the restart: %v, want its member owning its one topic", g, before[g])
		}
	}
	w.restart(0)
	for i := range patterns {
		g := fmt.Sprintf("g%d", i)
		w.settle(g)
		if after := w.owners(g); !maps.Equal(after, before[g]) {
			t.Errorf("%s after the restart: %v, before %v — the restore's pattern budget moved partitions of a pattern admitted at its join", g, after, before[g])
		}
	}
}
