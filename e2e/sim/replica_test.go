package sim

import (
	"testing"
	"time"
)

// ciReplicaSeeds is the replicas' sweep every `go test` runs.
const ciReplicaSeeds = 2000

// replicaOptions: three coordinator replicas over one log, 5 simulated
// minutes per seed (half the single coordinator's: the sweep's CI time;
// the per-seed floors are halved with it, see report).
func replicaOptions() Options { return Options{Replicas: 3, Duration: 5 * time.Minute} }

// TestSimReplicas runs the CI sweep with three coordinator replicas
// (replica.go): leaders killed (also between persist and send, and
// before a persist), paused past their lease and resumed as zombies,
// followers lagging so two stand for one silence, the log aborting
// transactions or losing their answers, one replica in half the seeds
// unfit (unfit.go: misconfigured, or broken after its barrier) — every
// checker after every event ("a fit replica leads" included), and the floors of the single-coordinator sweep. Across the
// sweep each replica scenario must have happened, so the test fails if
// the faults stop reaching them.
func TestSimReplicas(t *testing.T) {
	t.Parallel()
	var total sweep
	start := time.Now()
	t.Run("ci", func(t *testing.T) { runSweepWith(t, replicaOptions(), 1, ciReplicaSeeds, &total) })
	r := total.replicas
	t.Logf("seeds %d, simulated %.1f h, handoffs checked %d, takeovers %d (%d deposing a replica that still led), step-downs %d, fenced writes %d, log faults %d, pauses %d, not_leader answers followed %d, stale resets from deposed leaders %d, replica crashes %d, unfit marks of a misconfigured replica %d, takeovers of a broken replica failed after their barrier %d, slow beats %d, leaders kept by a stretched lease %d; %s in all",
		total.seeds, total.simulated.Hours(), total.handoffs, r.Takeovers, r.Contested, r.StepDowns, r.FencedWrites, r.WriteFaults, r.Pauses, r.NotLeader,
		r.StaleResets, total.coordCrashes, r.UnfitMarked, r.BrokenTakeovers, r.SlowBeats, r.StretchedLeases, time.Since(start).Round(time.Millisecond))
	total.checkRepeats(t) // a join given up at the margin goes to the next replica with its key
	if t.Failed() {
		return
	}
	for what, n := range map[string]int{"takeovers": r.Takeovers, "contested takeovers": r.Contested, "step-downs": r.StepDowns,
		"fenced writes": r.FencedWrites, "log faults": r.WriteFaults, "pauses": r.Pauses, "not_leader answers": r.NotLeader,
		"unfit marks": r.UnfitMarked, "broken takeovers": r.BrokenTakeovers,
		"slow beats": r.SlowBeats, "leaders kept by a stretched lease": r.StretchedLeases} {
		if n == 0 {
			t.Errorf("no %s in %d seeds: the sweep no longer exercises replicas", what, total.seeds)
		}
	}
}

// TestReplicaZombieFenced: a leader paused past its lease resumes
// believing it leads; whatever it then tries to persist fails fenced
// (nothing of it is sent) and it steps down. Seeds with pauses and no
// other coordinator fault; every checker holds, and the fenced zombie
// writes happen.
func TestReplicaZombieFenced(t *testing.T) {
	t.Parallel()
	s := runTuned(t, zombieProfile, 6)
	if fenced, contested := s.FencedWrites, s.Contested; fenced == 0 || contested == 0 {
		t.Fatalf("zombies: %d fenced writes, %d takeovers from a replica that still led; want both > 0", fenced, contested)
	}
}

// zombieProfile: pauses every 20 s, no other coordinator fault.
func zombieProfile(p *profile) {
	p.coordCrash, p.readyCrash = 0, 0
	p.replicas.pauseEvery, p.replicas.writeFail, p.replicas.lag = 20*time.Second, 0, 0
}

// TestReplicaTraceDeterministic: a seed with replicas replays the same.
func TestReplicaTraceDeterministic(t *testing.T) {
	t.Parallel()
	first, second := Run(7, replicaOptions()), Run(7, replicaOptions())
	if first.TraceHash != second.TraceHash || first.Stats != second.Stats {
		t.Fatalf("two runs differ: %016x %+v vs %016x %+v", first.TraceHash, first.Stats, second.TraceHash, second.Stats)
	}
	if first.Stats.Takeovers == 0 {
		t.Fatalf("seed 7 took over nothing: %+v", first.Stats)
	}
}

// TestReplicaPlantedBugCaught plants a bug in the replicas' takeover: the
// new leader restores its machine from what its follower had applied
// before the takeover read the log to its end (the step DESIGN §9 puts
// between fencing and serving). It hands out epochs the log already
// holds, and the epochs checker catches it. Without the bug the same
// seeds hold (TestReplicaSlowReaders).
func TestReplicaPlantedBugCaught(t *testing.T) {
	t.Parallel()
	caught := plantedFailureWith(t, replicaOptions(), bugs{serveBeforeLogEnd: true}, slowReaders, "epochs only rise",
		[]string{"grant safety", "committed offsets", "handoff duplicates", "exclusive reader", "machine invariants"})
	t.Logf("caught by %q: %v", caught.Checker, caught)
}

// TestReplicaUnconfirmedAnswersCaught plants a bug in the replicas'
// confirm-before-answer rule (leader.MustConfirm, the decision the
// replica shell runs): a replica answers sync polls and capability
// renewals from memory without the log's confirmation, so a leader
// deposed while it had nothing to write keeps answering as if it led.
// Slow readers (a follower stands before it read the live leader's
// beats) depose leaders that are running, not paused; checker 8 catches
// the answers they send after.
func TestReplicaUnconfirmedAnswersCaught(t *testing.T) {
	t.Parallel()
	caught := plantedFailureWith(t, replicaOptions(), bugs{answerUnconfirmed: true}, slowReaders, "deposed sends nothing",
		[]string{"grant safety", "exclusive reader", "acked fence", "epochs only rise", "committed offsets", "handoff duplicates"})
	t.Logf("caught by %q: %v", caught.Checker, caught)
}

// slowReaders: a follower decides before it read the log nine times in
// ten, so replicas stand while the leader is alive and busy: takeovers
// that depose a running leader. No rogue poller: a takeover every few
// seconds restarts the lag rule's clock for every pending fence (a new
// leader cannot know when the old one appended them), so with a
// non-acking id polling no fence ages past gateway_timeout and handoffs
// wait for expiry, as before the rule — too few for these seeds' floors.
func slowReaders(p *profile) {
	p.replicas.lag = 0.9
	p.rogueEvery = 0
}

// TestReplicaSlowReaders: the planted bugs' seeds hold without the bugs
// (every checker, checker 8 included), and running leaders were deposed.
func TestReplicaSlowReaders(t *testing.T) {
	t.Parallel()
	if s := runTuned(t, slowReaders, 4); s.Contested == 0 {
		t.Fatal("slow readers deposed no running leader")
	}
}

// runTuned runs seeds 1..n of the replicas' options tuned by tune,
// reporting each, and returns the replica counts summed.
func runTuned(t *testing.T, tune func(*profile), n uint64) Stats {
	var sum Stats
	for seed := uint64(1); seed <= n; seed++ {
		opts := replicaOptions()
		opts.tune = tune
		r := Run(seed, opts)
		report(t, r)
		sum.FencedWrites += r.Stats.FencedWrites
		sum.Contested += r.Stats.Contested
	}
	return sum
}
