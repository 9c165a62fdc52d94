package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"
)

// LogStore is a Backend on an append-only log of transactions: one shard of
// the Kafka state topic (OpenKafka) or of its in-memory twin (OpenMem).
// It is the shard's only writer from the moment it was opened (the open
// fenced every earlier one) until a newer writer fences it.
//
// Update stages the batch over the materialized state (the Writer's checks
// read it), appends it as ONE transaction — one record per key written,
// tombstones for deletes, then a commit record — and applies it to the
// state only once the log committed it. A failed append leaves the
// backend refusing every later write: ErrFenced when a newer writer took
// over, ErrBroken otherwise (the outcome may be unknown; open again to
// learn it). Safe for concurrent use.
type LogStore struct {
	t     logTransport
	opts  LogOptions
	state *logState
	nonce []byte

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc

	// writeMu serialises Updates, so a batch's checks read the state the
	// previous batch left.
	writeMu sync.Mutex
	writer  logWriter
	seq     uint64 // commit records this writer appended (the barrier was 0)
	failed  error  // sticky: the first failed append
	// begun numbers the commits this writer began (read without writeMu
	// by Mark); confirmed is the number of the last one that committed
	// (log_confirm.go).
	begun     atomic.Uint64
	confirmed uint64
	since     int // records committed since the last snapshot began

	// closeMu guards closed: operations hold it for reading, Close for
	// writing.
	closeMu sync.RWMutex
	closed  bool

	snapshotting sync.Mutex     // one snapshot at a time
	background   sync.WaitGroup // snapshots started by Update
}

var _ Backend = (*LogStore)(nil)

func newLogStore(t logTransport, opts LogOptions, state *logState, w logWriter, nonce []byte) *LogStore {
	ctx, cancel := context.WithCancel(context.Background())
	return &LogStore{t: t, opts: opts, state: state, writer: w, nonce: nonce, seq: 1, ctx: ctx, cancel: cancel}
}

// checkLayout refuses a log this writer cannot serve — the check of
// Follower.Check, now over the log read to its end: another key layout,
// shared settings that differ from ours, a key ring this KEK cannot open
// — and writes what the log lacks: the layout version into a new log,
// and those of our shared settings it does not record yet.
func (l *LogStore) checkLayout(ours map[string]string) error {
	if err := l.state.compatible(l.t.name(), ours, l.opts.AdoptSettings); err != nil {
		return err
	}
	var records []logRecord
	if _, found := l.state.get([]byte(prefixLayout)); !found {
		records = append(records, logRecord{key: []byte(prefixLayout), value: encodeUint(layoutBase)})
	}
	settings, err := l.state.settingsUpdate(ours)
	if err != nil {
		return fmt.Errorf("store: %s: open: %w", l.t.name(), err)
	}
	if settings != nil {
		records = append(records, logRecord{key: []byte(keyLogSettings), value: settings})
	}
	if len(records) == 0 {
		return nil
	}
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	return l.commit(records)
}

// Update runs fn with a Writer and appends what it wrote as one
// transaction; it returns once the log committed it (Backend).
func (l *LogStore) Update(fn func(w *Writer) error) error {
	return l.writing("update", func() error {
		b := &logBatch{state: l.state, staged: map[string][]byte{}}
		if err := stage(b, fn); err != nil || len(b.order) == 0 {
			return err
		}
		if err := l.commit(b.records(l.opts.KEK)); err != nil {
			return err
		}
		l.maybeSnapshot(len(b.order))
		return nil
	})
}

// writing runs write serialised with every other write, unless the store
// is closed or its writer failed.
func (l *LogStore) writing(op string, write func() error) error {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	l.closeMu.RLock()
	defer l.closeMu.RUnlock()
	switch {
	case l.closed:
		return fmt.Errorf("store: %s: %w", op, ErrClosed)
	case l.failed != nil:
		return fmt.Errorf("store: %s: %w", op, l.failed)
	}
	return write()
}

// commit appends records and a commit record as one transaction, then
// applies them. Callers hold writeMu.
func (l *LogStore) commit(records []logRecord) error {
	return l.commitWithin(l.ctx, records)
}

// commitWithin is commit bounded by ctx, which ends on Interrupt (l.ctx
// or a context that also ends with it: Resign), and by
// LogOptions.Timeout.
func (l *LogStore) commitWithin(ctx context.Context, records []logRecord) error {
	n := l.began()
	commit := commitRecord{writer: l.opts.WriterID, nonce: l.nonce, seq: l.seq}
	all := append(records, logRecord{key: []byte(keyLogCommit), value: encodeCommit(commit)})
	ctx, cancel := context.WithTimeout(ctx, l.opts.Timeout)
	defer cancel()
	last, err := l.writer.commit(ctx, all)
	if err != nil {
		l.fail(err)
		return fmt.Errorf("store: commit batch: %w", l.failed)
	}
	l.seq++
	l.confirmed = n
	// Our own records: a beat decodes (we encoded it), so apply cannot fail.
	if err := l.state.apply(records, last, commit); err != nil {
		panic(err)
	}
	return nil
}

// fail makes err sticky and drops the writer at once: nothing is retried
// or aborted on its behalf (a retried abort could re-initialise the
// producer and depose the writer that deposed this one).
func (l *LogStore) fail(err error) {
	switch {
	case errors.Is(err, ErrFenced):
	case l.ctx.Err() != nil: // Interrupt or Close cut it short
		err = fmt.Errorf("%s: %w: %w", l.t.name(), ErrClosed, err)
	default:
		err = fmt.Errorf("%s: %w: %w", l.t.name(), ErrBroken, err)
	}
	l.failed = err
	if closeErr := l.writer.close(); closeErr != nil {
		l.opts.Logger.Warn("close failed log writer", zap.String("log", l.t.name()), zap.Error(closeErr))
	}
	l.writer = nil
}

// Fenced reports whether a newer writer has deposed this one (known at its
// first write after the takeover).
func (l *LogStore) Fenced() bool {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	return errors.Is(l.failed, ErrFenced)
}

// Load returns the state of the last committed transaction (Backend).
func (l *LogStore) Load() (*Snapshot, error) {
	l.closeMu.RLock()
	defer l.closeMu.RUnlock()
	if l.closed {
		return nil, fmt.Errorf("store: load: %w", ErrClosed)
	}
	snapshot, err := l.state.load()
	if err != nil {
		return nil, fmt.Errorf("store: load: %w", err)
	}
	return snapshot, nil
}

// Position reports how far the log is applied, and a channel closed at the
// next commit.
func (l *LogStore) Position() (Position, <-chan struct{}) { return position(l.state) }

// Interrupt ends the write in flight, and any later one, at once: it
// fails (ErrClosed) and the writer is dropped, as after any failed
// append. A replica calls it when it stops leading — stepping down or
// shutting down — so neither waits for a Kafka that does not answer.
// Safe because fencing, not timing, decides what the log holds: the
// interrupted transaction is committed or not, never applied here (the
// state moves only on a commit's success), and the next writer's fence
// aborts it if still open, after which nothing of this writer commits.
func (l *LogStore) Interrupt() { l.cancel() }

// Close cuts short the write in flight (Interrupt), lets a snapshot in
// progress finish (within Timeout), then releases the log (Backend). It aborts nothing: a
// transaction left open is aborted by the next writer's fence or by the
// log's transaction timeout.
func (l *LogStore) Close() error {
	l.cancel() // before closeMu: a write in flight holds it (for reading)
	l.closeMu.Lock()
	defer l.closeMu.Unlock()
	if l.closed {
		return fmt.Errorf("store: close: %w", ErrClosed)
	}
	l.closed = true
	l.background.Wait() // a snapshot in progress finishes (within Timeout)
	var errs []error
	// No writeMu here: an Update waiting for closeMu holds it. Updates
	// touch the writer only under closeMu, which Close holds.
	if l.writer != nil {
		errs = append(errs, l.writer.close())
		l.writer = nil
	}
	errs = append(errs, l.t.close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("store: close: %w", err)
	}
	return nil
}

// logBatch stages one Update over the state: last write per key wins, in
// the order keys were first written.
type logBatch struct {
	state  *logState
	staged map[string][]byte // nil value: delete
	order  []string
}

func (b *logBatch) get(key []byte) ([]byte, bool, error) {
	if value, ok := b.staged[string(key)]; ok {
		return value, value != nil, nil
	}
	value, found := b.state.get(key)
	return value, found, nil
}

func (b *logBatch) set(key, value []byte) error {
	b.stage(string(key), value)
	return nil
}

func (b *logBatch) delete(key []byte) error {
	b.stage(string(key), nil)
	return nil
}

func (b *logBatch) stage(key string, value []byte) {
	if _, ok := b.staged[key]; !ok {
		b.order = append(b.order, key)
	}
	b.staged[key] = value
}

// records is the batch as log records, the key ring sealed with kek.
func (b *logBatch) records(kek *KEK) []logRecord {
	records := make([]logRecord, 0, len(b.order)+1)
	for _, key := range b.order {
		value := b.staged[key]
		if key == prefixKeyRing && value != nil && kek != nil {
			value = kek.seal([]byte(key), value)
		}
		records = append(records, logRecord{key: []byte(key), value: value})
	}
	return records
}
