package group_test

import (
	"fmt"
	"testing"

	"github.com/capgate/capgate/coordinator/assign"
	"github.com/capgate/capgate/coordinator/group"
)

// BenchmarkPatternRejoin: a member over 10,000 topics rejoins with a
// pattern never sent before, `(.?){58}z<n>` (cost ~245, within the
// default 256; it matches nothing, so only the matching is measured):
// one op is one rejoin. matched-in-loop steps the join without a match
// (Join.Matched nil: every topic matched in the loop — the simulation's
// joins, and before topicnames.go every join twice over); the
// matched-outside pair splits the join the shell sends into the loop's
// part (the join with its match: only topics changed since matched) and
// the shell's part (MatchTopics, in the join's goroutine). The ratio of
// the loop's parts is what another tenant's requests wait for.
func BenchmarkPatternRejoin(b *testing.B) {
	defer group.SetAssignorLookup(assign.Lookup)()
	topics := make(map[string]int32, 10_000)
	for i := range 10_000 {
		topics[fmt.Sprintf("orders-%05d", i)] = 1
	}
	bm := newBenchMachine(b, topics)
	limits := group.DefaultConfig().Limits
	// (.?){58}z fails slowly on every name, past the default
	// topic_pattern_steps (which refuses it after 4 Mi steps): unbounded
	// here, as the subject is where a whole match runs.
	limits.TopicPatternSteps = 1 << 30
	bm.ref++
	rd := bm.step(group.Join{Ref: bm.ref, Group: "g", ClientID: "c", Credential: group.Credential{ID: "a"}, TopicPattern: "none"})
	id := rd.Messages[0].(group.JoinReply).MemberID
	n := 0
	rejoin := func(b *testing.B, matched *group.PatternMatch, pattern string) {
		bm.ref++
		rd := bm.step(group.Join{Ref: bm.ref, Group: "g", MemberID: id, Credential: group.Credential{ID: "a"}, TopicPattern: pattern, Matched: matched})
		if _, ok := rd.Messages[0].(group.JoinReply); !ok {
			b.Fatalf("rejoin: %+v", rd.Messages[0])
		}
	}
	next := func() string { n++; return fmt.Sprintf("(.?){58}z%d", n) }
	b.Run("matched-in-loop", func(b *testing.B) {
		for b.Loop() {
			rejoin(b, nil, next())
		}
	})
	b.Run("matched-outside/loop", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			pattern := next()
			p, err := bm.m.TopicNames().MatchTopics(pattern, limits)
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			rejoin(b, p, pattern)
		}
	})
	b.Run("matched-outside/shell", func(b *testing.B) {
		var work int64
		for b.Loop() {
			p, err := bm.m.TopicNames().MatchTopics(next(), limits)
			if err != nil {
				b.Fatal(err)
			}
			work += p.Work
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(work), "ns/step")
	})
}
