package driver

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/capgate/capgate/coordinator/group"
	"github.com/capgate/capgate/store"
)

// Store is where the Driver persists each Ready before it sends anything
// of it: one synchronous, atomic Update per Ready. store.Backend (badger,
// the Kafka log, the in-memory MemLog) satisfies it. An error fails the
// Driver closed; for the Kafka log that includes store.ErrFenced (this
// replica was deposed: it must send nothing more and step down).
type Store interface {
	Update(fn func(w *store.Writer) error) error
}

// Observer watches what the Driver does, for metrics, the Kafka offset
// mirror, the console's timeline and the simulation's checkers. Its calls
// run in the Driver's goroutine and must not block.
type Observer interface {
	// Persisted sees a Ready once its records are durable, before any of
	// its messages is sent.
	Persisted(rd group.Ready)
	// Sending sees a persisted Ready just before its messages are handed
	// to their requests (which may then change them, e.g. resolve grant
	// offsets, in other goroutines) — all but its sync replies, handed
	// first: their requests only read them, so Sending may read them too
	// —; m is the machine, for read-only views.
	Sending(now time.Time, rd group.Ready, m *group.Machine)
}

// Reply receives the machine's answer to one submitted event, exactly
// once: the message, or Unavailable when the Driver failed closed or was
// closed first.
type Reply func(group.Message)

// Unavailable answers a request the machine will never answer: the
// Driver failed closed, or is shutting down. Taken: the machine had
// stepped the request's event — its answer was parked (an admin revoke
// or lease waiting for the gateways, a held heartbeat) or in the Ready
// whose persist failed — so it may have been applied, and persisted (a
// parked revoke was; a failed write may have reached the log all the
// same). Not Taken: the event was never stepped, nothing of it was
// applied.
type Unavailable struct {
	Ref   group.Ref
	Taken bool
}

// Request implements group.Message.
func (u Unavailable) Request() group.Ref { return u.Ref }

// ErrClosed is the Failure of a Driver that was closed without failing.
var ErrClosed = errors.New("coordinator: shutting down")

// Driver runs a group.Machine: gather, step, audit, persist, send,
// advance, failing closed on any error (see the package documentation).
type Driver struct {
	m        *group.Machine
	store    Store
	observer Observer

	nextRef    group.Ref
	pending    map[group.Ref]waiter
	heartbeats int           // heartbeats among pending
	events     []group.Event // gathered, stepped at the next Flush
	gathered   []group.Ref   // the refs of events with a reply, until stepped
	batch      batchNotes
	flagged    map[partKey]bool // partitions with stored flags (persist.go)
	unowned    unownedBlocks    // the stored unowned blocks' live entries (unowned.go)
	bulk       bulkBlocks       // the stored bulk blocks' live entries (bulk.go)
	runMin     int              // partitions of a topic in one Ready that go into blocks
	failure    error
	closed     bool
	bugs       Bugs
}

type waiter struct {
	reply     Reply
	heartbeat bool
}

// batchNotes is what the records of one Ready need from the events that
// produced them.
type batchNotes struct {
	resets map[partKey]bool // offsets set by an admin reset (may go back)
}

// Bugs plants known bugs in the Driver, for the tests that prove the
// simulation's checkers catch them. The zero value (every production
// Driver) plants none.
type Bugs struct {
	// SendOnFailedPersist delivers a Ready's messages although its
	// persist failed (fail open), and carries on.
	SendOnFailedPersist bool
	// DropOddOffsets leaves every odd committed offset out of the store
	// writes (persist.go).
	DropOddOffsets bool
}

// New returns a Driver over m, which must be fresh or restored from what
// restored describes (the zero Restored for a new store).
func New(m *group.Machine, st Store, obs Observer, restored Restored) *Driver {
	flagged := restored.flagged
	if flagged == nil {
		flagged = make(map[partKey]bool)
	}
	unowned := restored.unowned
	if unowned == nil {
		unowned = unownedBlocks{}
	}
	bulk := restored.bulk
	if bulk == nil {
		bulk = bulkBlocks{}
	}
	return &Driver{
		m: m, store: st, observer: obs,
		pending: make(map[group.Ref]waiter),
		batch:   batchNotes{resets: map[partKey]bool{}},
		flagged: flagged,
		unowned: unowned,
		bulk:    bulk,
		runMin:  unownedRunMin,
	}
}

// SetUnownedRunMin changes how many partitions of one group's topic a
// Ready must leave unowned for persist to write them as unowned blocks
// (unowned.go), and how many it must write for persist to write them as
// bulk blocks (bulk.go; default 64, at least 1). The simulation, whose topics have
// 8–24 partitions, lowers it in half its seeds, so its crashes and
// restores run that path too.
func (d *Driver) SetUnownedRunMin(n int) { d.runMin = max(n, 1) }

// Plant switches planted bugs on (tests only).
func (d *Driver) Plant(b Bugs) { d.bugs = b }

// Submit gathers the event build makes with its Ref; reply (nil for
// events without an answer) gets the machine's answer once a Flush sent
// it. After a failure reply gets Unavailable at once.
func (d *Driver) Submit(build func(group.Ref) group.Event, reply Reply) group.Ref {
	d.nextRef++
	ref := d.nextRef
	if d.failure != nil {
		if reply != nil {
			reply(Unavailable{Ref: ref})
		}
		return ref
	}
	ev := build(ref)
	if reply != nil {
		_, isHeartbeat := ev.(group.Heartbeat)
		d.pending[ref] = waiter{reply: reply, heartbeat: isHeartbeat}
		if isHeartbeat {
			d.heartbeats++
		}
	}
	if reply != nil {
		d.gathered = append(d.gathered, ref)
	}
	d.note(ev)
	d.events = append(d.events, ev)
	return ref
}

// note records what persisting this event's records needs to know.
// (The epoch of the capability that committed an offset comes with its
// record: group.OffsetRecord.Epoch, the machine's own.)
func (d *Driver) note(ev group.Event) {
	if e, ok := ev.(group.ResetOffset); ok {
		d.batch.resets[partKey{e.Group, e.Topic, e.Partition}] = true
	}
}

// Flush steps what was gathered (one StepMany, so a burst costs one
// reassignment per group) and handles the Ready. It returns the failure,
// if the Driver failed closed now or before.
func (d *Driver) Flush(now time.Time) error {
	if d.failure != nil {
		return d.failure
	}
	if len(d.events) > 0 {
		d.m.StepMany(now, d.events)
		clear(d.events)
		d.events = d.events[:0]
		d.gathered = d.gathered[:0]
	}
	return d.handle(now)
}

// Tick steps what was gathered, fires the machine's timers due at now,
// and handles the Ready.
func (d *Driver) Tick(now time.Time) error {
	if err := d.Flush(now); err != nil {
		return err
	}
	d.m.Tick(now)
	return d.handle(now)
}

// Step steps what was gathered, then ev, which has no answer (such as
// group.KeysChanged after a key rotation), and handles the Ready.
func (d *Driver) Step(now time.Time, ev group.Event) error {
	if err := d.Flush(now); err != nil {
		return err
	}
	d.m.Step(now, ev)
	return d.handle(now)
}

// Query runs fn on the machine once everything gathered is persisted and
// sent, so fn sees only durable state. It returns the failure instead
// when the Driver failed closed.
func (d *Driver) Query(now time.Time, fn func(*group.Machine)) error {
	if err := d.Flush(now); err != nil {
		return err
	}
	fn(d.m)
	return nil
}

// handle persists the pending Ready, then delivers its messages, then
// advances; any error fails the Driver closed before a message leaves.
func (d *Driver) handle(now time.Time) error {
	if !d.m.HasReady() {
		return nil
	}
	rd, err := d.m.Ready()
	if err != nil {
		return d.fail(fmt.Errorf("coordinator: refused a Ready: %w", err))
	}
	if len(rd.Persist) > 0 {
		err := d.persist(rd.Persist, now)
		clear(d.batch.resets)
		switch {
		case err != nil && d.bugs.SendOnFailedPersist:
			// planted bug: fail open
		case err != nil:
			return d.fail(err)
		default:
			d.observer.Persisted(rd)
		}
	}
	// Sync replies leave first: their requests only read them (the shell
	// encodes them, shared by the gateways polling from one seq), so the
	// Observer may read them meanwhile; the gateways applying a bulk
	// fence waited behind the console's timeline reading its 10,000
	// partition records (BENCHMARKS §3).
	d.deliver(rd.Messages, true)
	d.observer.Sending(now, rd, d.m)
	d.deliver(rd.Messages, false)
	d.m.Advance()
	return nil
}

// deliver hands the sync replies among msgs (sync true), or the other
// messages, to the requests waiting for them.
func (d *Driver) deliver(msgs []group.Message, sync bool) {
	for _, msg := range msgs {
		if _, isSync := msg.(group.SyncReply); isSync != sync {
			continue
		}
		ref := msg.Request()
		w, ok := d.pending[ref]
		if !ok {
			continue
		}
		delete(d.pending, ref)
		if w.heartbeat {
			d.heartbeats--
		}
		w.reply(msg)
	}
}

// fail fails the Driver closed with err: every waiting request gets
// Unavailable, and so will every later one.
func (d *Driver) fail(err error) error {
	d.failure = err
	d.answerAll()
	return err
}

// Close answers every waiting request Unavailable and refuses the rest
// (shutdown). Failure is then ErrClosed unless the Driver had failed.
func (d *Driver) Close() {
	if d.failure == nil {
		d.failure = ErrClosed
		d.closed = true
	}
	d.answerAll()
}

func (d *Driver) answerAll() {
	refs := make([]group.Ref, 0, len(d.pending))
	for ref := range d.pending {
		refs = append(refs, ref)
	}
	slices.Sort(refs) // in Ref order, so a simulation replays the same answers
	unstepped := make(map[group.Ref]bool, len(d.gathered))
	for _, ref := range d.gathered {
		unstepped[ref] = true
	}
	for _, ref := range refs {
		w := d.pending[ref]
		delete(d.pending, ref)
		w.reply(Unavailable{Ref: ref, Taken: !unstepped[ref]})
	}
	d.heartbeats = 0
	clear(d.events)
	d.events = d.events[:0]
	d.gathered = d.gathered[:0]
}

// Failure is why the Driver failed closed (nil while it runs; ErrClosed
// after Close without a failure).
func (d *Driver) Failure() error {
	if d.closed {
		return nil
	}
	return d.failure
}

// Stopped reports whether the Driver refuses everything (failed or
// closed).
func (d *Driver) Stopped() bool { return d.failure != nil }

// NextDeadline is when Tick must run next (ok false: no timer).
func (d *Driver) NextDeadline() (time.Time, bool) {
	if d.failure != nil {
		return time.Time{}, false
	}
	return d.m.NextDeadline()
}

// HeldHeartbeats is the number of heartbeats waiting for news.
func (d *Driver) HeldHeartbeats() int { return d.heartbeats }

// Waiting is the number of requests waiting for an answer.
func (d *Driver) Waiting() int { return len(d.pending) }

// SyncSeq is the highest sync sequence number handed out.
func (d *Driver) SyncSeq() uint64 { return d.m.SyncSeq() }
