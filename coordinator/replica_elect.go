package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/capgate/capgate/coordinator/leader"
	"github.com/capgate/capgate/store"
)

// elect is the replica's leadership loop: one goroutine owns the
// replica's decisions (leader.Replica around the Elector: the same code
// the simulation runs) and performs their actions — Promote (fence, read
// to the end, restore the machine, serve), Beat, StepDown — in goroutines
// of their own, stepping their outcomes back in. It returns when ctx is
// done, after it stopped leading — or at once with an error wrapping
// store.ErrIncompatible when the state the log holds at start shows this
// replica could never take over (it refuses to start).
func (r *Replica) elect(ctx context.Context) error {
	t := &term{r: r, results: make(chan termResult, 4), poke: make(chan struct{}, 1)}
	t.core = leader.NewReplica(r.cfg.electorConfig(), r.url, r.now())
	f := r.follow(ctx)
	if f == nil {
		return nil
	}
	if err := r.checkAtStart(ctx, f); err != nil {
		r.follower.Store(nil)
		f.Close()
		return err
	}
	t.setFollower(ctx, f)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		if ctx.Err() != nil { // an outcome stepped after it ended (a follower not re-opened)
			// Decide nothing more: a takeover decided then promoted a nil
			// follower, and the replica panicked on its way down (e2e/ha
			// TestStandbyStoppedWhileCutAfterAFailedTakeover).
			t.stop()
			return nil
		}
		d := t.core.Next(r.now())
		r.metrics.count(t.core.Stats())
		r.publish(t.core.View(), t.active)
		t.act(ctx, d)
		timer.Stop()
		if !d.At.IsZero() {
			timer.Reset(max(d.At.Sub(r.now()), 0))
		}
		select {
		case <-ctx.Done():
			t.stop()
			return nil
		case <-t.poke:
			t.observe()
		case res := <-t.results:
			t.pending--
			t.outcome(ctx, res)
		case <-t.activeDone:
			t.activeDone = nil
			err := t.active.loop.failure()
			if err == nil {
				err = errors.New("the coordinator's event loop stopped")
			} else {
				err = publicLoopError(err) // the step-down's reason is in /readyz, which answers anyone
			}
			t.wrote(false, err)
		case <-timer.C:
		}
	}
}

// checkAtStart reads the log to the end it has now — at most a lease: a
// log whose tail is an aborted transaction is caught up with only at the
// next commit, and the check goes on while following — and refuses to
// start when this replica could never take it over.
func (r *Replica) checkAtStart(ctx context.Context, f *store.Follower) error {
	if !r.startCheck {
		return nil
	}
	wait, cancel := context.WithTimeout(ctx, r.cfg.Replica.LeaseTimeout)
	defer cancel()
	if err := f.AwaitEnd(wait); err != nil && ctx.Err() == nil {
		r.log.Info("the state log was not read to its end at start; checking it while following", zap.Error(err))
	}
	if err := f.Check(); errors.Is(err, store.ErrIncompatible) {
		return fmt.Errorf("coordinator: replica %s refuses to start: %w (%s)", r.ID(), err, unfitFix)
	}
	return nil
}

// errNotFollowing fails a takeover decided while the replica had no
// follower to promote: a takeover that failed re-opens the follower
// (follow), which gives up only when the replica stops. Before, the
// promotion ran on no follower and the process died of a nil pointer at
// shutdown (CI: e2e/ha TestStateLogLeaderMoves, both standbys).
var errNotFollowing = errors.New("coordinator: not following the state log: nothing to take over from")

// term is the IO side of one replica's leadership loop.
type term struct {
	r    *Replica
	core *leader.Replica

	f          *store.Follower // while following
	stopWatch  context.CancelFunc
	poke       chan struct{} // the follower applied a commit
	active     *Coordinator  // while leading
	activeDone <-chan struct{}

	results chan termResult
	pending int       // actions whose result is not in yet
	started time.Time // when the last Promote began
}

// termResult is the outcome of an action run in its own goroutine.
type termResult struct {
	promoted bool
	err      error           // a Promote's or a Beat's
	active   *Coordinator    // a successful promotion
	stopped  bool            // a finished step-down
	f        *store.Follower // ... and its new follower
}

func (t *term) act(ctx context.Context, d leader.Decision) {
	if d.Do != leader.None {
		t.pending++
	}
	switch d.Do {
	case leader.Promote:
		f := t.f
		t.unwatch()
		t.started = t.r.now()
		if f == nil { // no follower: re-opening it ended with ctx (follow)
			go func() { t.results <- termResult{promoted: true, err: errNotFollowing} }()
			return
		}
		go func() { t.results <- t.r.promote(ctx, f) }()
	case leader.Beat:
		active := t.active
		go func() { t.results <- termResult{err: active.store.(*store.LogStore).Beat(t.r.url)} }()
	case leader.StepDown:
		active := t.active
		t.active, t.activeDone = nil, nil
		t.r.log.Warn("stepping down", zap.String("reason", d.Reason))
		go func() {
			if active != nil {
				interrupt(active) // a write in flight (the log unreachable) ends now
				active.Close()    // answers what it held 503; closes the log
			}
			t.results <- termResult{stopped: true, f: t.r.follow(ctx)}
		}()
	}
}

func (t *term) outcome(ctx context.Context, res termResult) {
	now := t.r.now()
	switch {
	case res.promoted && res.err != nil:
		t.r.log.Warn("takeover failed", zap.Error(res.err))
		t.core.Promoted(now, res.err, errors.Is(res.err, store.ErrFenced))
		if errors.Is(res.err, store.ErrIncompatible) {
			t.unfit(res.err) // not transient: it stops trying
		}
		t.setFollower(ctx, t.r.follow(ctx)) // the old one is spent or suspect
	case res.promoted:
		t.active, t.activeDone = res.active, res.active.loop.done
		t.r.metrics.takeover.Observe(now.Sub(t.started).Seconds())
		t.r.log.Info("took over: fenced, read the log to its end, serving",
			zap.Duration("took", now.Sub(t.started)), zap.String("signing_key", res.active.keys.current()))
		t.core.Promoted(now, nil, false)
	case res.stopped:
		t.core.Stopped(now) // after the outcome of a beat in flight
		t.setFollower(ctx, res.f)
	default:
		t.wrote(true, res.err)
	}
}

// wrote steps the outcome of one of the leadership's writes (a beat, or
// the loop's failed persist), logging a fenced one.
func (t *term) wrote(beat bool, err error) {
	fenced := errors.Is(err, store.ErrFenced)
	if fenced {
		t.r.log.Warn("write fenced: a newer leader took the shard over", zap.Bool("beat", beat), zap.Error(err))
	}
	t.core.Wrote(t.r.now(), beat, err, fenced)
}

// promote takes the shard over from f and builds the Coordinator that
// serves from the promoted log.
func (r *Replica) promote(ctx context.Context, f *store.Follower) termResult {
	ls, err := f.Promote(ctx)
	if err != nil {
		f.Close()
		return termResult{promoted: true, err: err}
	}
	r.follower.Store(nil)
	opts := append(append([]Option(nil), r.opts...), func(o *options) { o.backend = ls })
	c, err := New(r.cfg, r.log, opts...)
	if err != nil {
		ls.Close()
		return termResult{promoted: true, err: err}
	}
	go c.Run(context.Background()) // stopped by Close at step-down
	return termResult{promoted: true, active: c}
}

// setFollower makes f the follower whose commits are observed.
func (t *term) setFollower(ctx context.Context, f *store.Follower) {
	t.unwatch()
	t.f = f
	if f == nil {
		return
	}
	t.r.follower.Store(f)
	t.core.Following()
	t.check(f)
	watch, cancel := context.WithCancel(ctx)
	t.stopWatch = cancel
	go func() {
		for {
			_, changed := f.Position()
			select {
			case <-changed:
			case <-watch.Done():
				return
			}
			select {
			case t.poke <- struct{}{}:
			default:
			}
		}
	}()
}

func (t *term) unwatch() {
	if t.stopWatch != nil {
		t.stopWatch()
		t.stopWatch = nil
	}
	t.f = nil
}

// observe steps the follower's last applied commit.
func (t *term) observe() {
	f := t.r.follower.Load()
	if f == nil {
		return
	}
	pos, _ := f.Position()
	hint := leader.Hint{ID: pos.Leader.ID, URL: pos.Leader.URL}
	if t.core.Observe(t.r.now(), leader.Position{Commits: pos.Commits, Barriers: pos.Barriers, Writer: pos.Writer, Leader: hint, Resigned: pos.Resigned}) {
		t.r.log.Error("another coordinator replica writes under this replica's id: give each replica its own replica.id",
			zap.String("id", pos.Writer), zap.String("its_url", hint.URL), zap.String("our_url", t.r.url))
	}
	t.check(f)
}

// unfitFix is what an operator does about an unfit replica.
const unfitFix = "every replica needs the same coordinator id, cluster, kafka_state KEK and kafka_state.transactional_id_prefix"

// check steps the follower's check of the log it read so far: a replica
// that could not take it over is no standby and never stands.
func (t *term) check(f *store.Follower) {
	if t.r.view.Load().unfit != "" {
		return // unfit for good; nothing to learn
	}
	if err := f.Check(); errors.Is(err, store.ErrIncompatible) {
		t.unfit(err)
	}
}

// unfit steps that this replica cannot serve the log: ERROR once, the
// metric, and /readyz 503 naming what differs (ids and KEK fingerprints,
// never key material).
func (t *term) unfit(err error) {
	if t.core.Unfit(t.r.now(), err.Error()) {
		t.r.log.Error("this replica cannot take the state log over and will not try; it is no standby (/readyz 503)",
			zap.Error(err), zap.String("fix", unfitFix))
		t.r.metrics.unfit.Set(1)
	}
}

// stop ends the term: stop leading (close the Coordinator and its log) or
// following. A write in flight is cut short first, so a leader cut off
// from Kafka stops at once instead of when Kafka answers; the next leader
// fences this one whatever became of that write (store.LogStore.Interrupt).
func (t *term) stop() {
	t.unwatch()
	if t.active != nil {
		t.resign()
		interrupt(t.active)
		t.active.Close()
		t.r.log.Info("coordinator replica stopped leading: the coordinator and its log are closed")
	}
	// Actions in flight end soon (ctx is done); close what they opened.
	for ; t.pending > 0; t.pending-- {
		res := <-t.results
		if res.active != nil {
			res.active.Close()
		}
		if res.f != nil {
			res.f.Close()
		}
	}
	if f := t.r.follower.Swap(nil); f != nil {
		f.Close()
	}
}

// resign hands the leadership over as the replica shuts down: its last
// write to the log says so (store.LogStore.Resign), and the standbys stand
// at once (after their stagger) instead of after lease_timeout. It waits
// at most a lease: a resignation that does not commit (the log
// unreachable, a write in flight ahead of it) leaves the standbys to find
// the leader gone after their lease. Safety does not rest on it: a
// standby fences as in any takeover, and after the resignation this
// writer commits nothing more.
func (t *term) resign() {
	ls, ok := t.active.store.(*store.LogStore)
	if !ok {
		return
	}
	lease := t.r.cfg.Replica.LeaseTimeout
	t.r.log.Info("coordinator replica stops leading: resigning in the state log so that a standby takes over now", zap.Duration("within", lease))
	ctx, cancel := context.WithTimeout(context.Background(), lease)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- ls.Resign(ctx) }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		err = context.Cause(ctx)
	}
	if err != nil {
		t.r.log.Warn("coordinator replica could not resign; a standby takes over after replica.lease_timeout",
			zap.Duration("lease_timeout", lease), zap.Error(err))
		return
	}
	t.r.log.Info("coordinator replica resigned: a standby takes over now")
}

// interrupt cuts short the write in flight of c's log, and any later one
// (store.LogStore.Interrupt): c stops leading.
func interrupt(c *Coordinator) {
	if ls, ok := c.store.(*store.LogStore); ok {
		ls.Interrupt()
	}
}
