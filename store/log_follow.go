package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
)

// LogOptions configure a log backend (Kafka or the in-memory twin).
type LogOptions struct {
	// WriterID names the writer in every commit record it appends (the
	// coordinator replica's id); readers can tell who wrote what.
	WriterID string
	// KEK wraps the signing key ring before it reaches the log. Required
	// on Kafka (OpenKafka refuses to start without one); optional on the
	// in-memory twin.
	KEK *KEK
	// Settings are what every writer of this log must share (the
	// coordinator's issuer id and cluster): the log records the leader's,
	// and a writer whose values differ cannot take it over
	// (ErrIncompatible, log_settings.go). The store adds the KEK's id and
	// the transactional id.
	Settings map[string]string
	// AdoptSettings takes the log over although the shared settings it
	// records differ from Settings, and records ours: a deliberate change
	// of the coordinator id or cluster, every other writer stopped. A key
	// ring the KEK cannot open stays refused.
	AdoptSettings bool
	// SnapshotEvery writes a snapshot once this many records were
	// committed since the last one (in the background; 0 = only when
	// WriteSnapshot is called).
	SnapshotEvery int
	// SnapshotMaxAge: a reader ignores a snapshot older than this (0 = no
	// limit). On a compacted topic a delete's tombstone is removed after
	// the topic's delete.retention.ms, so a snapshot older than that could
	// miss a delete; OpenKafka sets it to half that retention.
	SnapshotMaxAge time.Duration
	// Timeout bounds one log operation (a transaction, a read to the end);
	// default 10s.
	Timeout time.Duration
	// Logger receives background failures (snapshots); nil discards.
	Logger *zap.Logger
	// Now is the clock of snapshot timestamps; nil is time.Now.
	Now func() time.Time
}

func (o LogOptions) withDefaults() LogOptions {
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Follower tails one shard's log: it restores the latest snapshot, then
// applies every committed transaction, whole, as it appears — the warm
// standby of a replica. Load gives the state at the last applied commit;
// Promote turns it into the shard's writer, replaying only what it has not
// read yet. Safe for concurrent use.
type Follower struct {
	t     logTransport
	opts  LogOptions
	state *logState

	reader logReader
	cancel context.CancelFunc
	done   chan struct{} // closed when the read loop returned (at once if manual)
	err    error         // why the read loop stopped (read after done)
	manual bool          // no read loop: CatchUp reads

	mu       sync.Mutex
	want     []byte        // nonce of the barrier Promote waits for
	seen     chan struct{} // closed when it was applied
	closed   bool
	promoted bool
}

// follow restores the latest snapshot of t's shard and starts tailing
// after it — in a goroutine, or, manual, only when CatchUp is called. The
// follower owns t from here on, also on error.
func follow(ctx context.Context, t logTransport, opts LogOptions, manual bool) (*Follower, error) {
	opts = opts.withDefaults()
	f := &Follower{t: t, opts: opts, state: newLogState(opts.KEK), done: make(chan struct{}), manual: manual}
	from, err := f.restoreSnapshot(ctx)
	if err == nil {
		f.reader, err = t.newReader(from)
		if err != nil {
			err = fmt.Errorf("store: %s: read: %w", t.name(), err)
		}
	}
	if err != nil {
		return nil, errors.Join(err, t.close())
	}
	loopCtx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	if manual {
		close(f.done)
		return f, nil
	}
	go f.run(loopCtx)
	return f, nil
}

// CatchUp applies every transaction the log holds now, without waiting:
// the way a manual follower (MemOptions.Manual) reads, so the
// deterministic simulation decides when a standby catches up.
func (f *Follower) CatchUp() error {
	now, ok := f.reader.(interface{ pollNow() []logRecord })
	if !f.manual || !ok {
		return errors.New("store: CatchUp: not a manual follower")
	}
	for {
		records := now.pollNow()
		if len(records) == 0 {
			return nil
		}
		commits, err := f.state.read(records)
		f.notice(commits)
		if err != nil {
			return fmt.Errorf("store: %s: catch up: %w", f.t.name(), err)
		}
	}
}

// restoreSnapshot loads the latest snapshot into the state and returns the
// offset to read from: after the snapshot, or 0 without one.
func (f *Follower) restoreSnapshot(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, f.opts.Timeout)
	defer cancel()
	snap, found, err := f.t.loadSnapshot(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: %s: load snapshot: %w", f.t.name(), err)
	}
	if !found {
		return 0, nil
	}
	age := time.Duration(f.opts.Now().UnixMilli()-snap.writtenMs) * time.Millisecond
	if f.opts.SnapshotMaxAge > 0 && age > f.opts.SnapshotMaxAge {
		f.opts.Logger.Warn("snapshot too old, replaying the whole log",
			zap.String("log", f.t.name()), zap.String("snapshot", snap.id), zap.Duration("age", age))
		return 0, nil
	}
	values, err := snap.decode()
	if err != nil {
		f.opts.Logger.Warn("snapshot unusable, replaying the whole log", zap.String("log", f.t.name()), zap.Error(err))
		return 0, nil
	}
	f.state.restore(values, snap.covers)
	return snap.covers + 1, nil
}

// run applies committed records until ctx is cancelled or reading fails.
func (f *Follower) run(ctx context.Context) {
	defer close(f.done)
	for {
		records, err := f.reader.poll(ctx)
		if err != nil {
			if ctx.Err() == nil {
				f.err = fmt.Errorf("store: %s: tail: %w", f.t.name(), err)
			}
			return
		}
		commits, err := f.state.read(records)
		f.notice(commits)
		if err != nil {
			f.err = fmt.Errorf("store: %s: tail: %w", f.t.name(), err)
			return
		}
	}
}

// notice closes seen when the awaited barrier is among commits.
func (f *Follower) notice(commits []commitRecord) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range commits {
		if f.want != nil && bytes.Equal(c.nonce, f.want) {
			close(f.seen)
			f.want = nil
		}
	}
}

// Load returns the state at the last transaction applied.
func (f *Follower) Load() (*Snapshot, error) {
	if f.isClosed() {
		return nil, fmt.Errorf("store: load: %w", ErrClosed)
	}
	snapshot, err := f.state.load()
	if err != nil {
		return nil, fmt.Errorf("store: load: %w", err)
	}
	return snapshot, nil
}

// Position is how far a follower (or writer) has applied its log.
type Position struct {
	// Offset of the last commit record applied; -1 before the first.
	Offset int64
	// Commits applied since this follower started (a snapshot counts none).
	Commits uint64
	// Barriers among Commits: takeover barriers (a candidate's fence
	// marker, written before it knows whether it can serve). Commits minus
	// Barriers are a leader's own writes: beats and Readys.
	Barriers uint64
	// Writer is the WriterID of the last commit applied ("" before one).
	Writer string
	// Leader is the last beat applied (zero before one): the leader's id
	// and URL once Leader.ID == Writer.
	Leader Beat
	// Resigned: the last commit applied is its writer's resignation
	// (LogStore.Resign): that writer writes nothing more, so a follower
	// need not wait out a lease before standing. (It still fences.)
	Resigned bool
}

// Position reports how far the follower has read, and a channel closed at
// the next transaction it applies.
func (f *Follower) Position() (Position, <-chan struct{}) {
	return position(f.state)
}

func position(s *logState) (Position, <-chan struct{}) {
	offset, commits, barriers, changed := s.position()
	s.mu.RLock()
	writer, beat, resigned := s.last.writer, s.beat, s.resigned
	s.mu.RUnlock()
	return Position{Offset: offset, Commits: commits, Barriers: barriers, Writer: writer, Leader: beat, Resigned: resigned}, changed
}

// Err reports why tailing stopped, or nil while it runs.
func (f *Follower) Err() error {
	select {
	case <-f.done:
		return f.err
	default:
		return nil
	}
}

// Promote takes the shard over, in this order (the takeover sequence,
// DESIGN §9):
//
//  0. Check (Follower.Check) what was read so far: a writer that could
//     not serve this log fails with ErrIncompatible having written
//     nothing and fenced nobody.
//  1. Fence: make a new writer the shard's only one (Kafka: InitProducerID
//     on the shard's transactional id). From here on every earlier
//     writer's next commit fails fenced, and a transaction one had open is
//     aborted.
//  2. Barrier: commit an empty transaction whose commit record carries a
//     fresh nonce. Whatever any earlier writer committed lies before it.
//  3. Read to the end: keep applying until the barrier itself is applied;
//     the state now holds every committed write of every earlier writer.
//  4. Serve: stop tailing and hand the state to the returned LogStore,
//     once the check of step 0 passes over the log read to its end (a
//     new log gets its layout and this writer's shared settings).
//
// On error the follower keeps tailing and may Promote again; on success it
// is spent (its Load and Close then fail).
func (f *Follower) Promote(ctx context.Context) (*LogStore, error) {
	if f.isClosed() {
		return nil, fmt.Errorf("store: promote: %w", ErrClosed)
	}
	// Nothing others can observe before this: a writer that could not
	// serve the log (ErrIncompatible: settings, KEK, layout) must neither
	// fence the shard nor commit a barrier.
	if err := f.Check(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, f.opts.Timeout)
	defer cancel()
	var w logWriter
	var nonce []byte
	for attempt := 1; ; attempt++ {
		var err error
		if w, err = f.t.newWriter(); err != nil {
			return nil, fmt.Errorf("store: %s: promote: %w", f.t.name(), err)
		}
		nonce, err = f.fenceAndBarrier(ctx, w)
		if err == nil {
			err = f.awaitBarrier(ctx, nonce)
		}
		if err == nil {
			break
		}
		w.close()
		// The client aborted the barrier itself (kafka.go,
		// kgoSilentAbort): nothing of it is visible, so start over with
		// a new writer; its fence only fences ours again.
		if !errors.Is(err, errSilentAbort) || attempt >= silentAbortAttempts {
			return nil, err
		}
		f.opts.Logger.Warn("the Kafka client aborted the takeover's barrier while answering its commit; starting over",
			zap.String("log", f.t.name()), zap.Int("attempt", attempt))
	}
	f.stop(true)
	l := newLogStore(f.t, f.opts, f.state, w, nonce)
	if err := l.checkLayout(settingsOf(f.t, f.opts)); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// fenceAndBarrier is steps 1 and 2 of Promote.
func (f *Follower) fenceAndBarrier(ctx context.Context, w logWriter) ([]byte, error) {
	if err := w.fence(ctx); err != nil {
		return nil, fmt.Errorf("store: %s: promote: fence: %w", f.t.name(), err)
	}
	nonce := newNonce()
	f.mu.Lock()
	f.want, f.seen = nonce, make(chan struct{})
	f.mu.Unlock()
	barrier := logRecord{key: []byte(keyLogCommit), value: encodeCommit(commitRecord{writer: f.opts.WriterID, nonce: nonce})}
	if _, err := w.commit(ctx, []logRecord{barrier}); err != nil {
		return nil, fmt.Errorf("store: %s: promote: barrier: %w", f.t.name(), err)
	}
	return nonce, nil
}

// awaitBarrier is step 3 of Promote.
func (f *Follower) awaitBarrier(ctx context.Context, nonce []byte) error {
	f.mu.Lock()
	seen := f.seen
	f.mu.Unlock()
	if f.manual {
		if err := f.CatchUp(); err != nil {
			return err
		}
		select {
		case <-seen:
			return nil
		default:
			return fmt.Errorf("store: %s: promote: the barrier is not in the log after its commit", f.t.name())
		}
	}
	select {
	case <-seen:
		return nil
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return fmt.Errorf("store: %s: promote: read to the end: %w", f.t.name(), ctx.Err())
	}
}

// errSilentAbort: the Kafka client ended a transaction with an abort
// although it was asked to commit and every produce of it succeeded
// (kafka.go, kgoSilentAbort).
var errSilentAbort = errors.New("the Kafka client aborted a transaction it was asked to commit")

// silentAbortAttempts bounds Promote's fresh starts after errSilentAbort
// (seen only on a writer's first transaction: a second start is the norm).
const silentAbortAttempts = 3

// stop ends tailing; promoted hands the transport on instead of closing it.
func (f *Follower) stop(promoted bool) {
	f.mu.Lock()
	f.closed, f.promoted = true, promoted
	f.mu.Unlock()
	f.cancel()
	<-f.done
	f.reader.close()
}

func (f *Follower) isClosed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closed
}

// Close stops tailing and releases the transport.
func (f *Follower) Close() error {
	if f.isClosed() {
		return fmt.Errorf("store: close: %w", ErrClosed)
	}
	f.stop(false)
	if err := f.t.close(); err != nil {
		return fmt.Errorf("store: close: %w", err)
	}
	return nil
}

// openLog is the single-writer open: follow, then Promote.
func openLog(ctx context.Context, t logTransport, opts LogOptions, manual bool) (*LogStore, error) {
	f, err := follow(ctx, t, opts, manual)
	if err != nil {
		return nil, err
	}
	l, err := f.Promote(ctx)
	if err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return l, nil
}

// KeyRing returns the signing key ring as the log holds it at the last
// applied commit, unsealed (nil when none was written yet): what a
// standby serves as JWKS without loading the whole state.
func (f *Follower) KeyRing() ([]byte, error) {
	if f.isClosed() {
		return nil, fmt.Errorf("store: key ring: %w", ErrClosed)
	}
	sealed, found := f.state.get([]byte(prefixKeyRing))
	if !found {
		return nil, nil
	}
	plain, err := f.state.unseal([]byte(prefixKeyRing), sealed)
	if err != nil {
		return nil, fmt.Errorf("store: key ring: %w", err)
	}
	return decodeBytes(plain)
}
