package coordinator

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/capgate/capgate/coordinator/leader"
	"github.com/capgate/capgate/store"
)

// elect is the replica's leadership loop: one goroutine owns the Elector
// and performs its actions — Promote (fence, read to the end, restore the
// machine, serve), Beat, StepDown — in goroutines of their own, stepping
// their outcomes back in. It returns when ctx is done, after it stopped
// leading.
func (r *Replica) elect(ctx context.Context) {
	t := &term{r: r, results: make(chan termResult, 4), poke: make(chan struct{}, 1)}
	t.e = leader.New(r.cfg.electorConfig(), r.now())
	if t.setFollower(ctx, r.follow(ctx)); t.f == nil {
		return
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		d := t.e.Decide(r.now())
		r.publish(d, t.active)
		t.act(ctx, d)
		timer.Stop()
		if !d.At.IsZero() {
			timer.Reset(max(d.At.Sub(r.now()), 0))
		}
		select {
		case <-ctx.Done():
			t.stop()
			return
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
			}
			t.e.Step(r.now(), leader.WriteDone{Err: err, Fenced: errors.Is(err, store.ErrFenced)})
		case <-timer.C:
		}
	}
}

// term is the state of one replica's leadership loop.
type term struct {
	r *Replica
	e *leader.Elector

	f          *store.Follower // while following
	stopWatch  context.CancelFunc
	poke       chan struct{} // the follower applied a commit
	active     *Coordinator  // while leading
	activeDone <-chan struct{}
	beating    bool
	stopped    *termResult // a finished step-down waiting for the beat in flight

	results chan termResult
	sameID  bool      // another replica was seen writing under our id
	pending int       // actions whose result is not in yet
	started time.Time // when the last Promote began
}

// termResult is the outcome of an action run in its own goroutine.
type termResult struct {
	ev     leader.Event
	active *Coordinator    // a successful promotion
	f      *store.Follower // a finished step-down's new follower
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
		go func() { t.results <- t.r.promote(ctx, f) }()
	case leader.Beat:
		t.beating = true
		active := t.active
		go func() {
			err := active.store.(*store.LogStore).Beat(t.r.url)
			t.results <- termResult{ev: leader.WriteDone{Beat: true, Err: err, Fenced: errors.Is(err, store.ErrFenced)}}
		}()
	case leader.StepDown:
		active := t.active
		t.active, t.activeDone = nil, nil
		t.r.metrics.stepdowns.Inc()
		t.r.log.Warn("stepping down", zap.String("reason", d.Reason))
		go func() {
			if active != nil {
				active.Close() // answers what it held 503; closes the log
			}
			t.results <- termResult{ev: leader.Stopped{}, f: t.r.follow(ctx)}
		}()
	}
}

func (t *term) outcome(ctx context.Context, res termResult) {
	now := t.r.now()
	switch ev := res.ev.(type) {
	case leader.PromoteDone:
		if ev.Err != nil {
			t.r.log.Warn("takeover failed", zap.Error(ev.Err))
			t.e.Step(now, ev)
			t.setFollower(ctx, t.r.follow(ctx)) // the old one is spent or suspect
			return
		}
		t.active, t.activeDone = res.active, res.active.loop.done
		t.r.metrics.takeovers.Inc()
		t.r.metrics.takeover.Observe(now.Sub(t.started).Seconds())
		t.r.log.Info("took over: fenced, read the log to its end, serving",
			zap.Duration("took", now.Sub(t.started)), zap.String("signing_key", res.active.keys.current()))
		t.e.Step(now, ev)
	case leader.WriteDone:
		t.beating = false
		t.e.Step(now, ev)
		if t.stopped != nil {
			res, t.stopped = *t.stopped, nil
			t.outcome(ctx, res)
		}
	case leader.Stopped:
		if t.beating {
			t.stopped = &res // Stopped only after the beat's outcome
			return
		}
		t.e.Step(now, ev)
		t.setFollower(ctx, res.f)
	}
}

// promote takes the shard over from f and builds the Coordinator that
// serves from the promoted log.
func (r *Replica) promote(ctx context.Context, f *store.Follower) termResult {
	ls, err := f.Promote(ctx)
	if err != nil {
		f.Close()
		return termResult{ev: leader.PromoteDone{Err: err, Fenced: errors.Is(err, store.ErrFenced)}}
	}
	r.follower.Store(nil)
	opts := append(append([]Option(nil), r.opts...), func(o *options) { o.backend = ls })
	c, err := New(r.cfg, r.log, opts...)
	if err != nil {
		ls.Close()
		return termResult{ev: leader.PromoteDone{Err: err, Fenced: errors.Is(err, store.ErrFenced)}}
	}
	go c.Run(context.Background()) // stopped by Close at step-down
	return termResult{ev: leader.PromoteDone{}, active: c}
}

// setFollower makes f the follower whose commits are observed.
func (t *term) setFollower(ctx context.Context, f *store.Follower) {
	t.unwatch()
	t.f = f
	if f == nil {
		return
	}
	t.r.follower.Store(f)
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
	writer, hint := pos.Writer, leader.Hint{ID: pos.Leader.ID, URL: pos.Leader.URL}
	if writer == t.r.ID() && hint.ID == writer && hint.URL != t.r.url {
		// Another replica writes under this replica's id (replica.id
		// left empty on several): its commits would look like our own
		// old ones and never as a live leader. Tell them apart by URL.
		if !t.sameID {
			t.sameID = true
			t.r.log.Error("another coordinator replica writes under this replica's id: give each replica its own replica.id",
				zap.String("id", writer), zap.String("its_url", hint.URL), zap.String("our_url", t.r.url))
		}
		writer = writer + "@" + hint.URL
		hint.ID = writer
	}
	t.e.Step(t.r.now(), leader.Observed{Writer: writer, Leader: hint})
}

// stop ends the term: stop leading (close the Coordinator and its log) or
// following.
func (t *term) stop() {
	t.unwatch()
	if t.active != nil {
		t.active.Close()
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
