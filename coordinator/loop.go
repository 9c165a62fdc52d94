package coordinator

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/capgate/capgate/coordinator/group"
)

// errUnavailable answers requests the loop will never process: the
// coordinator is shutting down, or failed closed.
var errUnavailable = errors.New("coordinator: unavailable")

// request is one unit of work for the event loop: an event for the
// machine (build gets the Ref; reply receives the answer, nil for events
// without one), a read-only query, or a key rotation.
type request struct {
	build  func(group.Ref) group.Event
	reply  chan group.Message
	query  func(*group.Machine)
	rotate chan rotateResult
}

type rotateResult struct {
	ids keyIDs
	err error
}

// shutdownReply answers a request still held when the loop stops.
type shutdownReply struct{ ref group.Ref }

func (s shutdownReply) Request() group.Ref { return s.ref }

// partKey names one partition of one group.
type partKey struct {
	group, topic string
	partition    int32
}

// loop owns the machine in one goroutine (doc.go of coordinator/group):
// Step each request, persist Ready.Persist in one synchronous store
// update, only then hand Ready.Messages to the waiting handlers (which
// mint and write them), then Advance. One timer follows NextDeadline.
type loop struct {
	c        *Coordinator
	m        *group.Machine
	requests chan *request
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}

	mu  sync.Mutex
	err error // why the loop failed closed

	broken error // a persist failed: fail closed at the end of the step

	nextRef    group.Ref
	pending    map[group.Ref]pendingRequest
	heartbeats int
	timer      *time.Timer
	batch      batchNotes
	flagged    map[partKey]bool      // partitions with stored flags
	revokedAt  map[partKey]time.Time // handoffs in flight, for the duration histogram
	events     []group.Event         // gathered by apply, stepped at flush
}

type pendingRequest struct {
	reply     chan group.Message
	heartbeat bool
}

// batchNotes is what the records of one Ready need from the events that
// produced them.
type batchNotes struct {
	resets map[partKey]bool   // offsets set by an admin reset (may go back)
	epochs map[partKey]uint64 // epochs of the capabilities that committed
}

func newLoop(c *Coordinator, m *group.Machine, flagged map[partKey]bool) *loop {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &loop{
		c: c, m: m,
		requests:  make(chan *request, c.cfg.EventQueue),
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
		pending:   make(map[group.Ref]pendingRequest),
		timer:     t,
		batch:     batchNotes{resets: map[partKey]bool{}, epochs: map[partKey]uint64{}},
		flagged:   flagged,
		revokedAt: make(map[partKey]time.Time),
	}
}

func (l *loop) run() {
	defer close(l.done)
	if err := l.flush(); err != nil {
		l.fail(err)
		return
	}
	l.c.metrics.syncSeq.Set(float64(l.m.SyncSeq()))
	for {
		l.arm()
		select {
		case <-l.stop:
			l.answerAll()
			return
		case r := <-l.requests:
			l.apply(r)
			l.drain()
		case <-l.timer.C:
			l.m.Tick(l.c.now())
		}
		if l.broken == nil {
			l.flush()
		}
		l.c.metrics.heartbeatsHeld.Set(float64(l.heartbeats))
		if l.broken != nil {
			l.fail(l.broken)
			return
		}
	}
}

// drain takes the requests already queued, up to event_batch_max, so one
// persist covers them all.
func (l *loop) drain() {
	for range l.c.cfg.EventBatchMax - 1 {
		if l.broken != nil {
			return
		}
		select {
		case r := <-l.requests:
			l.apply(r)
		default:
			return
		}
	}
}

// arm sets the timer to the machine's next deadline.
func (l *loop) arm() {
	at, ok := l.m.NextDeadline()
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
		// Queries see only persisted state: flush what earlier events of
		// the batch changed first.
		if l.broken != nil || l.flush() != nil {
			r.reply <- shutdownReply{}
			return
		}
		r.query(l.m)
		close(r.reply)
	case r.rotate != nil:
		r.rotate <- l.rotate(now)
	default:
		l.nextRef++
		ref := l.nextRef
		ev := r.build(ref)
		if r.reply != nil {
			_, isHeartbeat := ev.(group.Heartbeat)
			l.pending[ref] = pendingRequest{reply: r.reply, heartbeat: isHeartbeat}
			if isHeartbeat {
				l.heartbeats++
			}
		}
		l.note(ev)
		l.events = append(l.events, ev)
	}
}

// stepPending hands the events gathered since the last flush to the
// machine in one StepMany, so a burst costs one reassignment per group.
func (l *loop) stepPending() {
	if len(l.events) == 0 {
		return
	}
	l.m.StepMany(l.c.now(), l.events)
	clear(l.events)
	l.events = l.events[:0]
}

// note records what persisting this event's records needs to know.
func (l *loop) note(ev group.Event) {
	var groupName string
	var offsets []group.CommitOffset
	switch e := ev.(type) {
	case group.Commit:
		groupName, offsets = e.Group, e.Offsets
	case group.Leave:
		groupName, offsets = e.Group, e.Offsets
	case group.ResetOffset:
		l.batch.resets[partKey{e.Group, e.Topic, e.Partition}] = true
	}
	for _, o := range offsets {
		l.batch.epochs[partKey{groupName, o.Topic, o.Partition}] = o.Epoch
	}
}

// rotate rotates the signing keys and tells the machine, so every
// gateway's next sync reply carries the new key set.
func (l *loop) rotate(now time.Time) rotateResult {
	removed, err := l.c.keys.rotate(l.c.store, now)
	if err != nil {
		l.c.log.Error("rotate signing keys", zap.Error(err))
		return rotateResult{err: err}
	}
	if len(removed) > 0 {
		l.c.tokens.FlushKeys(removed...)
	}
	l.stepPending()
	l.m.Step(now, group.KeysChanged{})
	ids := *l.c.keys.kids.Load()
	l.c.log.Info("signing keys rotated", zap.String("current", ids.Current), zap.String("next", ids.Next))
	return rotateResult{ids: ids}
}

// flush persists the pending Ready, then delivers its messages, then
// advances. Nothing is delivered if the persist fails: the loop is broken
// and stops at the end of the step.
func (l *loop) flush() error {
	if l.broken != nil {
		return l.broken
	}
	l.stepPending()
	if !l.m.HasReady() {
		return nil
	}
	rd, err := l.m.Ready()
	if err != nil {
		// The machine's safety audit refused this Ready: persist and send
		// none of it.
		l.c.metrics.auditFailures.Inc()
		l.broken = fmt.Errorf("coordinator: refused a Ready: %w", err)
		return l.broken
	}
	if len(rd.Persist) > 0 {
		start := time.Now()
		err := l.persist(rd.Persist)
		l.c.metrics.persist.Observe(time.Since(start).Seconds())
		if err != nil {
			l.broken = err
			return err
		}
		l.mirrorOffsets(rd.Persist)
	}
	clear(l.batch.resets)
	clear(l.batch.epochs)
	now := l.c.now()
	for _, msg := range rd.Messages {
		l.observe(msg, now)
		p, ok := l.pending[msg.Request()]
		if !ok {
			continue
		}
		delete(l.pending, msg.Request())
		if p.heartbeat {
			l.heartbeats--
		}
		p.reply <- msg
	}
	l.c.timeline.Observe(now, rd, l.m) // the console's handoff timeline; never blocks
	l.c.metrics.syncSeq.Set(float64(l.m.SyncSeq()))
	l.m.Advance()
	return nil
}

// fail stops the loop for good after a persist failure or a failed
// safety audit: nothing of the failed Ready is sent, every waiting request
// gets 503, and so does every later one; /healthz and /readyz report it
// and Run returns the error when the coordinator is stopped. A refused
// batch (epoch, offset or seq regression) or a failed audit is a bug.
func (l *loop) fail(err error) {
	msg := "persist failed: event loop stopped, failing closed"
	if errors.Is(err, group.ErrUnsafe) {
		msg = "safety audit failed: nothing of the Ready persisted or sent, event loop stopped, failing closed"
	}
	l.c.log.Error(msg, zap.Error(err))
	l.c.metrics.failedClosed.Set(1)
	l.mu.Lock()
	l.err = err
	l.mu.Unlock()
	l.answerAll()
}

func (l *loop) failure() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// answerAll answers every held request with shutdownReply.
func (l *loop) answerAll() {
	for ref, p := range l.pending {
		p.reply <- shutdownReply{ref: ref}
		delete(l.pending, ref)
	}
	l.heartbeats = 0
	l.c.metrics.heartbeatsHeld.Set(0)
}

// stopAndWait stops the loop and waits until it answered everything.
func (l *loop) stopAndWait() {
	l.stopOnce.Do(func() { close(l.stop) })
	<-l.done
}

// observe feeds the metrics from a message about to be delivered.
func (l *loop) observe(msg group.Message, now time.Time) {
	switch m := msg.(type) {
	case group.News:
		for _, r := range m.Revoke {
			key := partKey{m.Group, r.Topic, r.Partition}
			if _, ok := l.revokedAt[key]; !ok {
				l.revokedAt[key] = now
			}
			l.c.metrics.revokes.WithLabelValues("handoff").Inc()
		}
		l.granted(m.Grants, now)
		l.c.metrics.renewals.Add(float64(len(m.Renew)))
	case group.JoinReply:
		l.granted(m.Grants, now)
	case group.LeaseReply:
		l.granted([]group.Grant{m.Grant}, now)
	case group.RevokeReply:
		l.c.metrics.revokes.WithLabelValues("admin").Inc()
	case group.RevokeMemberReply:
		l.c.metrics.revokes.WithLabelValues("member").Inc()
	}
}

func (l *loop) granted(grants []group.Grant, now time.Time) {
	for _, g := range grants {
		l.c.metrics.grants.Inc()
		key := partKey{g.Group, g.Topic, g.Partition}
		if at, ok := l.revokedAt[key]; ok {
			l.c.metrics.handoff.Observe(now.Sub(at).Seconds())
			delete(l.revokedAt, key)
		}
	}
}

// mirrorOffsets hands committed offsets to the Kafka mirror.
func (l *loop) mirrorOffsets(records []group.Record) {
	if !l.c.cfg.MirrorOffsets {
		return
	}
	for _, r := range records {
		if o, ok := r.(group.OffsetRecord); ok && o.Offset >= 0 {
			l.c.mirror.add(o.Group, o.Topic, o.Partition, o.Offset)
		}
	}
}

// call sends an event and waits for the machine's answer.
func (c *Coordinator) call(build func(group.Ref) group.Event) (group.Message, error) {
	r := &request{build: build, reply: make(chan group.Message, 1)}
	if err := c.enqueue(r); err != nil {
		return nil, err
	}
	select {
	case msg := <-r.reply:
		if _, ok := msg.(shutdownReply); ok {
			return nil, errUnavailable
		}
		return msg, nil
	case <-c.loop.done:
		select {
		case msg := <-r.reply:
			if _, ok := msg.(shutdownReply); !ok {
				return msg, nil
			}
		default:
		}
		return nil, errUnavailable
	}
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
