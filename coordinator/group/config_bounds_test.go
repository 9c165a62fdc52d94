package group_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/group"
)

// TestGroupConfigBounded: every field of a group's config has an upper
// bound. Before, handoff_timeout had none (1e15 ms was taken, so a holder
// that stays alive and never releases kept the next holder waiting for
// ever) and max_moves_per_second none; a value too large for a duration
// (the shell saturates it) printed as 2562047h47m16.854775807s.
func TestGroupConfigBounded(t *testing.T) {
	w, a := oneMember(t, longSessions, func(c *group.Config) { c.HandoffTimeoutMax = 30 * time.Second })
	huge := time.Duration(math.MaxInt64) // what the shell passes for 1e15 ms
	over, atMax := 30*time.Second+time.Millisecond, 30*time.Second
	moves, manyMoves := group.MaxMovesPerSecondMax, group.MaxMovesPerSecondMax+1
	for _, tc := range []struct {
		ev   group.SetGroupConfig
		want string
	}{
		{group.SetGroupConfig{HandoffTimeout: &huge}, "handoff_timeout: too large, the max is 30s (groups.handoff_timeout_max)"},
		{group.SetGroupConfig{HandoffTimeout: &over}, "handoff_timeout: must be <= 30s (groups.handoff_timeout_max), got 30.001s"},
		{group.SetGroupConfig{SessionTimeout: &huge}, "session_timeout: too large, the max is 5m0s (groups.session_timeout_min, groups.session_timeout_max)"},
		{group.SetGroupConfig{MaxMovesPerSecond: &manyMoves}, "max_moves_per_second: must be within [0, 1000000] (0: unlimited), got 1000001"},
	} {
		ref := w.nextRef()
		tc.ev.Ref, tc.ev.Group = ref, "g"
		w.step(tc.ev)
		mustReject(t, w, ref, api.CodeBadRequest)
		if r := w.replies[ref].(group.Rejected); !strings.HasSuffix(r.Message, tc.want) {
			t.Errorf("refusal %q, want it to end %q", r.Message, tc.want)
		}
	}
	if c := w.store.groups["g"].Config; c.HandoffTimeout != 10*time.Second || c.MaxMovesPerSecond != 0 {
		t.Fatalf("a refused config was kept: %+v", c)
	}
	// At the bounds it is taken, and a holder that never releases holds
	// up the handoff for handoff_timeout_max at most.
	ref := w.nextRef()
	w.step(group.SetGroupConfig{Ref: ref, Group: "g", HandoffTimeout: &atMax, MaxMovesPerSecond: &moves})
	if c := mustReply[group.GroupConfigReply](t, w, ref).Config; c.HandoffTimeout != atMax || c.MaxMovesPerSecond != moves {
		t.Fatalf("config at the bounds: %+v", c)
	}
	b := w.join("g", "b", "t")
	w.pollUntilParked("gw1")
	w.advance(atMax - time.Millisecond)
	if p := w.partition("g", "t", 1); p.Owner == b {
		t.Fatalf("b owns the partition before the handoff timed out: %+v", p)
	}
	w.advance(time.Millisecond)
	if p := w.partition("g", "t", 1); p.Owner != b {
		t.Fatalf("handoff_timeout_max passed and b does not own the partition: %+v", p)
	}
	_ = a
}
