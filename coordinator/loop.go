package coordinator

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/capgate/capgate/coordinator/driver"
	"github.com/capgate/capgate/coordinator/group"
)

// errUnavailable answers requests the loop will never process: the
// coordinator is shutting down, or failed closed. Nothing of such a
// request was applied.
var errUnavailable = errors.New("coordinator: unavailable")

// errTaken answers a request the machine had taken when the loop stopped
// (driver.Unavailable.Taken): it may have been applied, and persisted —
// an admin revoke or lease waiting for the gateways' acks was; a write
// that failed may have reached the log all the same.
var errTaken = fmt.Errorf("%w after taking the request", errUnavailable)

// request is one unit of work for the event loop: an event for the
// machine (build gets the Ref; reply receives the answer, nil for events
// without one), a read-only query, or a key rotation.
type request struct {
	build  func(group.Ref) group.Event
	reply  chan group.Message
	query  func(*group.Machine)
	rotate chan rotateResult
	// weight is what the event can add to one persist, in topics named
	// (a join's topic list; a pattern join weighs a whole batch): drain
	// stops batching before the weights of one Ready pass
	// topics_per_member, so concurrent joins of long topic lists never
	// add up to a transaction the store refuses (badger's batch limit),
	// which would fail the coordinator closed.
	weight int
}

type rotateResult struct {
	ids keyIDs
	err error
}

// loop is the goroutine that owns the driver (coordinator/driver: step,
// audit, persist, send, advance, fail closed). What is left here is
// thin: the request channel, one timer following NextDeadline, draining
// up to event_batch_max queued requests into one Flush, and reporting.
type loop struct {
	c        *Coordinator
	d        *driver.Driver
	requests chan *request
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
	timer    *time.Timer
	carry    *request // taken from requests by drain, applied first next round

	mu  sync.Mutex
	err error // why the loop failed closed
}

func newLoop(c *Coordinator, d *driver.Driver) *loop {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &loop{
		c: c, d: d,
		requests: make(chan *request, c.cfg.EventQueue),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		timer:    t,
	}
}

func (l *loop) run() {
	defer close(l.done)
	l.d.Flush(l.c.now()) // a restored machine's first Ready
	for !l.d.Stopped() {
		if r := l.carry; r != nil {
			l.carry = nil
			l.apply(r)
			l.drain(r.weight)
			l.d.Flush(l.c.now())
			continue
		}
		l.arm()
		select {
		case <-l.stop:
			l.d.Close()
			l.c.metrics.heartbeatsHeld.Set(0)
			return
		case r := <-l.requests:
			l.apply(r)
			l.drain(r.weight)
			l.d.Flush(l.c.now())
		case <-l.timer.C:
			l.d.Tick(l.c.now())
		}
		l.c.metrics.heartbeatsHeld.Set(float64(l.d.HeldHeartbeats()))
	}
	l.fail(l.d.Failure())
}

// drain takes the requests already queued, up to event_batch_max and a
// total weight of topics_per_member beyond the first's, so one persist
// covers them all; a request past the weight waits in carry for the next.
func (l *loop) drain(weight int) {
	budget := l.c.cfg.Groups.Limits.TopicsPerMember
	for range l.c.cfg.EventBatchMax - 1 {
		select {
		case r := <-l.requests:
			if r.weight > 0 && weight+r.weight > budget {
				l.carry = r
				return
			}
			weight += r.weight
			l.apply(r)
		default:
			return
		}
	}
}

// arm sets the timer to the machine's next deadline.
func (l *loop) arm() {
	at, ok := l.d.NextDeadline()
	if !ok {
		l.timer.Stop()
		return
	}
	l.timer.Reset(max(at.Sub(l.c.now()), 0))
}

func (l *loop) apply(r *request) {
	now := l.c.now()
	switch {
	case r.query != nil:
		// Queries see only persisted state: the driver flushes first.
		if l.d.Query(now, r.query) != nil {
			r.reply <- driver.Unavailable{}
			return
		}
		close(r.reply)
	case r.rotate != nil:
		r.rotate <- l.rotate(now)
	default:
		var reply driver.Reply
		if r.reply != nil {
			reply = func(msg group.Message) { r.reply <- msg }
		}
		l.d.Submit(r.build, reply)
	}
}

// rotate rotates the signing keys (their own store update, before use)
// and tells the machine, so every gateway's next sync reply carries the
// new key set.
func (l *loop) rotate(now time.Time) rotateResult {
	removed, err := l.c.keys.rotate(l.c.store, now)
	if err != nil {
		l.c.log.Error("rotate signing keys", zap.Error(err))
		return rotateResult{err: err}
	}
	if len(removed) > 0 {
		l.c.tokens.FlushKeys(removed...)
	}
	if err := l.d.Step(now, group.KeysChanged{}); err != nil {
		return rotateResult{err: errUnavailable}
	}
	ids := *l.c.keys.kids.Load()
	l.c.log.Info("signing keys rotated", zap.String("current", ids.Current), zap.String("next", ids.Next))
	return rotateResult{ids: ids}
}

// fail reports the driver's failure once: nothing of the failed Ready
// was sent, every waiting request got 503, and so does every later one;
// /healthz and /readyz report it and Run returns it when the coordinator
// is stopped. A refused batch (epoch, offset or seq regression) or a
// failed audit is a bug; a fenced Kafka-log write means another replica
// leads.
func (l *loop) fail(err error) {
	msg := "persist failed: event loop stopped, failing closed"
	if errors.Is(err, group.ErrUnsafe) {
		msg = "safety audit failed: nothing of the Ready persisted or sent, event loop stopped, failing closed"
		l.c.metrics.auditFailures.Inc()
	}
	l.c.log.Error(msg, zap.Error(err))
	l.c.metrics.failedClosed.Set(1)
	l.c.metrics.heartbeatsHeld.Set(0)
	l.mu.Lock()
	l.err = err
	l.mu.Unlock()
}

func (l *loop) failure() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// stopAndWait stops the loop and waits until it answered everything.
func (l *loop) stopAndWait() {
	l.stopOnce.Do(func() { close(l.stop) })
	<-l.done
}

// call sends an event and waits for the machine's answer.
func (c *Coordinator) call(build func(group.Ref) group.Event) (group.Message, error) {
	return c.callWeighted(0, build)
}

// callWeighted is call for an event of a weight (request.weight).
func (c *Coordinator) callWeighted(weight int, build func(group.Ref) group.Event) (group.Message, error) {
	r := &request{build: build, reply: make(chan group.Message, 1), weight: weight}
	if err := c.enqueue(r); err != nil {
		return nil, err
	}
	select {
	case msg := <-r.reply:
		return answered(msg)
	case <-c.loop.done:
		select {
		case msg := <-r.reply:
			return answered(msg)
		default:
		}
		return nil, errUnavailable // never handed to the machine
	}
}

// answered is the machine's answer msg to a call, or the error of a
// call the loop stopped before answering: errTaken when the machine had
// taken it, errUnavailable when not.
func answered(msg group.Message) (group.Message, error) {
	switch u, ok := msg.(driver.Unavailable); {
	case ok && u.Taken:
		return nil, errTaken
	case ok:
		return nil, errUnavailable
	}
	return msg, nil
}

// submit sends an event that has no answer.
func (c *Coordinator) submit(ev group.Event) error {
	return c.enqueue(&request{build: func(group.Ref) group.Event { return ev }})
}

// query runs fn on the machine in the loop, against persisted state, and
// waits for it.
func (c *Coordinator) query(fn func(*group.Machine)) error {
	r := &request{query: fn, reply: make(chan group.Message, 1)}
	if err := c.enqueue(r); err != nil {
		return err
	}
	select {
	case _, failed := <-r.reply:
		if failed {
			return errUnavailable
		}
		return nil
	case <-c.loop.done:
		select {
		case _, failed := <-r.reply:
			if !failed {
				return nil
			}
		default:
		}
		return errUnavailable
	}
}

// rotateKeys rotates the signing keys in the loop.
func (c *Coordinator) rotateKeys() (keyIDs, error) {
	r := &request{rotate: make(chan rotateResult, 1)}
	if err := c.enqueue(r); err != nil {
		return keyIDs{}, err
	}
	select {
	case res := <-r.rotate:
		return res.ids, res.err
	case <-c.loop.done:
		return keyIDs{}, errUnavailable
	}
}

func (c *Coordinator) enqueue(r *request) error {
	select {
	case <-c.loop.stop:
		return errUnavailable
	case <-c.loop.done:
		return errUnavailable
	default:
	}
	select {
	case c.loop.requests <- r:
		return nil
	case <-c.loop.stop:
		return errUnavailable
	case <-c.loop.done:
		return errUnavailable
	}
}
