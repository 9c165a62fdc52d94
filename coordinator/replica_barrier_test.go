package coordinator_test

import (
	"context"
	"testing"
	"time"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/coordinator/leader"
	"github.com/capgate/capgate/store"
)

// A candidate that dies between its takeover barrier and its first beat
// is taken over by a standby within half of replica.lease_timeout_max
// (+ its stagger) on a quick log, not after the whole max: the shard was
// leaderless max + stagger (4.6 s at the defaults, review25). Real
// replicas on kfake; the dead candidate is a writer of the shard's log
// that promotes (fence, barrier, read to the end) and writes nothing
// more. The max is 8 s here so that half of it (4 s) and the whole of it
// are far apart on a loaded machine: the standby must decide to stand
// less than 8 s after the candidate began its promotion.
func TestDeadCandidatesBarrierIsTakenOverWithinHalfTheMax(t *testing.T) {
	e := newEnvBrokers(t, map[string]int32{"orders": 2}, 3)
	useKafkaState(t, e)
	const leaseMax = 8 * time.Second
	e.cfg.Replica.LeaseTimeoutMax = leaseMax
	s := startReplicas(t, e, 2)
	first := s.awaitLeader(t)
	standby := s.replicas[1-first]

	f, err := store.FollowKafka(context.Background(), stateLogOptions(t, e, "dead-candidate"))
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	candidate, err := f.Promote(context.Background())
	if err != nil {
		t.Fatalf("the candidate's promotion: %v", err)
	}
	t.Cleanup(func() { candidate.Close() })
	// The fenced leader goes away before it finds out (a replica that
	// steps down reads the log afresh and sees a commit, not a barrier).
	s.stop(t, first)

	stood := awaitStanding(t, standby, began.Add(2*leaseMax))
	if took := stood.Sub(began); took >= leaseMax {
		t.Fatalf("the standby stood %s after the candidate began promoting, want below lease_timeout_max %s (half of it + its stagger)", took, leaseMax)
	} else {
		t.Logf("the standby stood %s after the dead candidate began promoting (lease_timeout_max %s)", took, leaseMax)
	}
	s.awaitLeader(t)
}

// awaitStanding returns when r first stood (candidate or leader), by
// deadline at the latest.
func awaitStanding(t *testing.T, r *coordinator.Replica, deadline time.Time) time.Time {
	t.Helper()
	for {
		role, _, next := r.Watch()
		if role == leader.Candidate || role == leader.Leader {
			return time.Now()
		}
		select {
		case <-next:
		case <-time.After(time.Until(deadline)):
			t.Fatalf("the standby did not stand by %s (%s)", deadline.Format(time.TimeOnly), role)
		}
	}
}
