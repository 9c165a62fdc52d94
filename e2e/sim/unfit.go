package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/capgate/capgate/store"
)

// An unfit replica (redteam2 K / K′; the replicafix branch). In some
// seeds of a replicas' world one replica can never serve the log, in one
// of two ways, drawn from the seed's own stream (so every other draw of
// the seed is the same):
//
//   - unfitMisconfigured: it runs with another coordinator id (the
//     issuer, a shared setting the log records, store.LogOptions.Settings).
//     It first boots once a fit replica's takeover recorded the settings
//     (a fresh log takes the first leader's: that is K′, which the start
//     check covers, not this fault); it boots past the shell's start
//     check (as when the log recorded them only after it started), so the
//     follower's check (store.Follower.Check, after every applied commit,
//     as coordinator/replica_elect.go does) must make it Unfit; a Promote
//     it might still start fails store.ErrIncompatible having written
//     nothing, and makes it Unfit too. It must never stand, nor lead.
//   - unfitBroken: its takeovers fail AFTER the store's Promote fenced
//     the shard and committed its barrier — building its machine fails,
//     as coordinator/replica_elect.go's promote does when New fails (and
//     as the wrong-KEK replica's did before the fix, when the KEK was
//     checked only after the barrier). The error is not ErrIncompatible:
//     it stands again after every lease, for ever, and has the shortest
//     stagger, so it stands first. Only the once-only barrier rule of
//     leader.Replica.Observe keeps its barriers from holding every fit
//     follower off (the liveness checker, unfitLiveness, catches that).
type unfitMode uint8

const (
	unfitNone unfitMode = iota
	unfitMisconfigured
	unfitBroken
)

func (m unfitMode) String() string {
	switch m {
	case unfitMisconfigured:
		return "misconfigured"
	case unfitBroken:
		return "broken"
	}
	return "none"
}

// unfitFault is the seed's unfit replica (mode none: there is none).
type unfitFault struct {
	mode unfitMode
	idx  int // the replica
}

// drawUnfit draws the seed's unfit replica: one seed in two has one, of
// either kind.
func drawUnfit(seed uint64, count int) unfitFault {
	if count < 2 {
		return unfitFault{}
	}
	d := draw{rand.New(rand.NewPCG(seed, 0x0f17_bad5))}
	if d.rng.IntN(2) == 0 {
		return unfitFault{}
	}
	return unfitFault{mode: unfitMode(1 + d.rng.IntN(2)), idx: d.rng.IntN(count)}
}

// The shared settings of the replicas (store.LogOptions.Settings): the
// coordinator id, as coordinator/replica.go records it; the misconfigured
// replica's has a typo.
const (
	simIssuer   = "capgate-coordinator"
	typoIssuer  = "capgate-coordinator-typo"
	errBrokenAt = "building the machine"
)

// errBroken is the broken replica's failed takeover (after the barrier).
var errBroken = errors.New("sim: the replica cannot build its machine from the promoted log (" + errBrokenAt + ")")

// unfitMode is this coordinator's unfit mode (none for a fit one).
func (c *coordinator) unfitMode() unfitMode {
	if c.rep == nil || c.w.unfit.idx != c.idx {
		return unfitNone
	}
	return c.w.unfit.mode
}

// fit: the replica could serve the log.
func (c *coordinator) fit() bool { return c.unfitMode() == unfitNone }

// logOptions are the replica's store options: its id and its settings.
func (c *coordinator) logOptions() store.MemOptions {
	issuer := simIssuer
	if c.unfitMode() == unfitMisconfigured {
		issuer = typoIssuer
	}
	return store.MemOptions{Manual: true, LogOptions: store.LogOptions{WriterID: c.rep.cfg.ID,
		Settings: map[string]string{store.SettingIssuer: issuer}}}
}

// setUnfitFault draws the seed's unfit replica and, for the broken one,
// gives it the shortest stagger (it stands first after every silence).
func (w *World) setUnfitFault() {
	w.unfit = drawUnfit(w.seed, w.opts.Replicas)
	if w.opts.noUnfit {
		w.unfit = unfitFault{}
	}
	if w.unfit.mode != unfitBroken {
		return
	}
	s := w.prof.replicas.stagger
	lowest := 0
	for i := range s {
		if s[i] < s[lowest] {
			lowest = i
		}
	}
	s[lowest], s[w.unfit.idx] = s[w.unfit.idx], s[lowest]
}

// checkFit steps the follower's check of what it read (the shell's
// term.check): a replica that can never take the log over is Unfit. The
// check reads only the follower's state, so it is not repeated until the
// follower applied more of the log: the sim's replicas observe every
// half beat, and re-checking a log read no further (its settings decoded,
// its key ring unsealed) was some 8% of the replica sweep's CPU.
func (c *coordinator) checkFit(now time.Time) {
	r := c.rep
	if r.follower == nil || r.core == nil || r.core.View().Unfit != "" {
		return
	}
	pos, _ := r.follower.Position()
	if r.checked == r.follower && r.checkedAt == pos.Offset {
		return
	}
	r.checked, r.checkedAt = r.follower, pos.Offset
	if err := r.follower.Check(); errors.Is(err, store.ErrIncompatible) {
		c.markUnfit(now, err)
	}
}

// markUnfit steps that the replica is unfit (for good).
func (c *coordinator) markUnfit(now time.Time, err error) {
	if c.rep.core.Unfit(now, err.Error()) {
		c.w.stats.UnfitMarked++
		c.w.tracef("%s is unfit: %v", c.rep.cfg.ID, err)
	}
}

// bootLate boots the misconfigured replica once a fit replica took the
// log over (and so recorded the shared settings).
func (w *World) bootLate() {
	if w.unfit.mode != unfitMisconfigured {
		return
	}
	if c := w.coords[w.unfit.idx]; !c.up && !c.booted {
		c.booted = true
		w.after(w.prof.replicas.beat, evCoordRestart, c.node, c.restart)
	}
}

// liveness is the checker "a fit replica leads within a bound": from the
// last moment a fit replica led (running, not paused), or no fit replica
// ran, or a fault struck a replica (a crash, a restart, a pause, a
// resume, a transaction the log failed: each restarts the clock), a fit
// replica must lead again within bound. A fit follower stands lease +
// stagger after the last commit it counted (it reads the log every
// beat/2, and skips reads now and then: the lag fault). A failed
// takeover's barrier is counted once between two leader writes; and a
// failed takeover on a log without the layout or the settings record
// commits them after its barrier (store.LogStore.checkLayout) — a write
// that counts as a leader's, so its next barrier counts once more. Two
// such pushes, and a lease of slack for lagging reads: 4 × (the longest
// lease — leaseMax where the log's pace stretches it — + the longest
// stagger) + the slowest beat + 2 s. Without the once-only rule a broken replica
// with the shortest stagger holds the others off for ever.
type liveness struct {
	w      *World
	since  time.Duration // the clock's start
	bound  time.Duration
	longst time.Duration // longest leaderless stretch seen
}

func newLiveness(w *World) *liveness {
	var stagger time.Duration
	for _, s := range w.prof.replicas.stagger {
		stagger = max(stagger, s)
	}
	return &liveness{w: w, bound: 4*(w.prof.replicas.longestLease()+stagger) + w.prof.replicas.slowBeatMax + 2*time.Second}
}

// fault restarts the clock: a fault struck a replica.
func (l *liveness) fault() {
	if l != nil {
		l.since = l.w.now
	}
}

// step runs after every event.
func (l *liveness) step() {
	w := l.w
	running := false
	for _, c := range w.coords {
		if !c.up || c.rep.paused || !c.fit() {
			continue
		}
		if c.isLeader() {
			l.since = w.now
			return
		}
		running = true
	}
	if !running {
		l.since = w.now
		return
	}
	gap := w.now - l.since
	l.longst = max(l.longst, gap)
	if gap > l.bound {
		w.fail("a fit replica leads", "no fit replica has led for %s (bound %s: lease %s; unfit replica: %s); leaders %s",
			gap, l.bound, w.prof.replicas.lease, l.w.unfitDesc(), w.leaders())
	}
}

// unfitDesc names the seed's unfit replica.
func (w *World) unfitDesc() string {
	if w.unfit.mode == unfitNone {
		return "none"
	}
	return fmt.Sprintf("%s (%s)", replicaID(w.unfit.idx), w.unfit.mode)
}
