package driver_test

import (
	"testing"

	"github.com/capgate/capgate/client/driver"
	"github.com/capgate/capgate/client/session"
)

// TestCloseStepsItsCancelledFetchesTogether: Close of a consumer holding
// 2,000 partitions cancels 2,000 fetches, each a FetchDone for the
// session. Stepped one at a time, each walked every partition (2,000 ×
// 2,000: ~1 s of the shell's lock on a loaded machine before the first
// revoke hook ran); they are stepped together now, and the close still
// revokes everything in one hook call and releases every partition once
// the hook returned.
func TestCloseStepsItsCancelledFetchesTogether(t *testing.T) {
	const partitions = 2000
	cfg := config()
	cfg.Session.FullChecks = false
	d, cmds := joined(t, cfg, partitions)
	if n := len(sends(cmds)); n < partitions {
		t.Fatalf("%d sends after the join, want a fetch per partition", n)
	}
	before := d.Session().Advances()
	cmds = d.User(session.CloseRequested{Now: t0})
	if walks := d.Session().Advances() - before; walks > 2 {
		t.Errorf("close walked the partitions %d times, want the close and its cancelled fetches in at most 2", walks)
	}
	cancels := 0
	var revoke session.CallRevoke
	for _, c := range cmds {
		switch c := c.(type) {
		case driver.Cancel:
			cancels++
		case session.CallRevoke:
			revoke = c
		}
	}
	if cancels != partitions || len(revoke.Partitions) != partitions {
		t.Fatalf("%d cancels, a revoke of %d partitions; want %d each", cancels, len(revoke.Partitions), partitions)
	}
	released := 0
	for _, s := range sends(d.User(session.HookDone{Now: t0, ID: revoke.ID})) {
		if s.Kind == driver.KindCommit && s.Commit.Release {
			released += len(s.Commit.Offsets)
		}
	}
	if released != partitions {
		t.Errorf("the hook's return released %d partitions, want %d", released, partitions)
	}
}

// TestAnswerManyStepsABatchOnce: a batch of fetch answers is stepped with
// one walk of the partitions, and each answered partition is fetched
// again, as Answer of each in turn would.
func TestAnswerManyStepsABatchOnce(t *testing.T) {
	const partitions = 100
	d, cmds := joined(t, config(), partitions)
	var answers []driver.Answered
	for _, s := range sends(cmds) {
		if s.Kind == driver.KindFetch {
			answers = append(answers, driver.Answered{Now: t0, Call: s.Call, Fetched: driver.Fetched{Next: s.Fetch.Offset}})
		}
	}
	if len(answers) != partitions {
		t.Fatalf("%d fetches after the join, want %d", len(answers), partitions)
	}
	before := d.Session().Advances()
	again := 0
	for _, s := range sends(d.AnswerMany(answers)) {
		if s.Kind == driver.KindFetch {
			again++
		}
	}
	if walks := d.Session().Advances() - before; walks != 1 {
		t.Errorf("%d answers stepped with %d walks, want 1", len(answers), walks)
	}
	if again != partitions {
		t.Errorf("%d fetches after the answers, want one per partition (%d)", again, partitions)
	}
}
