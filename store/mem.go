package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
)

// MemLog is the in-memory twin of the Kafka state topic, after
// hashicorp/raft's inmem_store: the deterministic simulation and unit tests
// run the very LogStore and Follower the Kafka backend runs, over a log
// that lives in memory. It keeps the semantics that matter:
//
//   - one append-only log per shard; a transaction's records appear all
//     at once or never (aborted transactions are invisible);
//   - one producer epoch per shard's transactional id: a writer's open
//     (fence) bumps it, and a writer holding an older epoch fails every
//     commit with a *FencedError, appending nothing;
//   - faults on demand (Fail): an aborted transaction, or one that commits
//     while its writer hears an error (the in-doubt case of a lost EndTxn
//     answer);
//   - one stored snapshot per shard.
//
// Safe for concurrent use; nothing survives the process.
type MemLog struct {
	mu     sync.Mutex
	shards map[int32]*memShard
}

type memShard struct {
	records  []logRecord // offset = index
	epoch    int64       // producer epoch of the shard's transactional id
	changed  chan struct{}
	snapshot *logSnapshot
	faults   []MemFault
}

// MemFault is a failure the next commit on a shard meets.
type MemFault int

const (
	// MemAbort aborts the transaction: nothing is appended, the writer
	// gets an error.
	MemAbort MemFault = iota + 1
	// MemLoseAnswer commits the transaction, but the writer gets an error,
	// as when the answer to Kafka's EndTxn is lost.
	MemLoseAnswer
	// MemClientAbort aborts the transaction and the writer learns it only
	// from its client, as when kgo aborts while answering a commit
	// (kafka.go, kgoSilentAbort).
	MemClientAbort
)

// NewMemLog returns an empty log.
func NewMemLog() *MemLog { return &MemLog{shards: map[int32]*memShard{}} }

// MemOptions configure a LogStore or Follower on a MemLog.
type MemOptions struct {
	LogOptions
	Shard int32
	// Manual makes FollowMem start no goroutine: the follower reads only
	// when CatchUp is called (and Promote catches up itself), so a
	// deterministic simulation decides when a standby reads.
	Manual bool
}

// OpenMem opens shard opts.Shard of m as its writer: fence, read to the
// end, serve (Follower.Promote). It starts no goroutine (background
// snapshots aside, SnapshotEvery).
func OpenMem(ctx context.Context, m *MemLog, opts MemOptions) (*LogStore, error) {
	return openLog(ctx, m.transport(opts.Shard), opts.LogOptions, true)
}

// FollowMem tails shard opts.Shard of m.
func FollowMem(ctx context.Context, m *MemLog, opts MemOptions) (*Follower, error) {
	return follow(ctx, m.transport(opts.Shard), opts.LogOptions, opts.Manual)
}

// Fail makes the next commit attempt on shard meet fault (faults queue
// up; a fenced attempt consumes its fault and fails fenced).
func (m *MemLog) Fail(shard int32, fault MemFault) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.shard(shard)
	s.faults = append(s.faults, fault)
}

// Len is the number of records in a shard's log (commit records included).
func (m *MemLog) Len(shard int32) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.shard(shard).records)
}

func (m *MemLog) shard(n int32) *memShard {
	s, ok := m.shards[n]
	if !ok {
		s = &memShard{changed: make(chan struct{})}
		m.shards[n] = s
	}
	return s
}

func (m *MemLog) transport(shard int32) *memTransport { return &memTransport{m: m, shard: shard} }

type memTransport struct {
	m     *MemLog
	shard int32
}

func (t *memTransport) name() string            { return "mem/" + strconv.Itoa(int(t.shard)) }
func (t *memTransport) transactionalID() string { return "mem-shard-" + strconv.Itoa(int(t.shard)) }
func (t *memTransport) close() error            { return nil }

func (t *memTransport) newWriter() (logWriter, error) { return &memWriter{t: t, epoch: -1}, nil }

func (t *memTransport) newReader(from int64) (logReader, error) {
	return &memReader{t: t, next: from}, nil
}

func (t *memTransport) endCommit(context.Context) (int64, error) {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	return int64(len(t.m.shard(t.shard).records)) - 1, nil
}

func (t *memTransport) saveSnapshot(_ context.Context, snap *logSnapshot) error {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	copied := *snap
	t.m.shard(t.shard).snapshot = &copied
	return nil
}

func (t *memTransport) loadSnapshot(context.Context) (*logSnapshot, bool, error) {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	snap := t.m.shard(t.shard).snapshot
	if snap == nil {
		return nil, false, nil
	}
	copied := *snap
	return &copied, true, nil
}

type memWriter struct {
	t     *memTransport
	epoch int64 // -1 until fence
}

func (w *memWriter) fence(context.Context) error {
	w.t.m.mu.Lock()
	defer w.t.m.mu.Unlock()
	s := w.t.m.shard(w.t.shard)
	s.epoch++
	w.epoch = s.epoch
	return nil
}

var errMemInjected = errors.New("mem log: injected fault")

func (w *memWriter) commit(_ context.Context, records []logRecord) (int64, error) {
	w.t.m.mu.Lock()
	defer w.t.m.mu.Unlock()
	s := w.t.m.shard(w.t.shard)
	// A fault is the next commit attempt's, fenced or not: one left
	// queued behind a fenced writer would strike another writer's
	// transaction (a lost answer there commits what its writer, and a
	// test's bookkeeping, believe failed).
	var fault MemFault
	if len(s.faults) > 0 {
		fault, s.faults = s.faults[0], s.faults[1:]
	}
	if w.epoch != s.epoch {
		return 0, &FencedError{Log: w.t.name(), TransactionalID: w.t.transactionalID(),
			Err: fmt.Errorf("producer epoch %d, current %d", w.epoch, s.epoch)}
	}
	switch fault {
	case MemAbort:
		return 0, fmt.Errorf("%w: transaction aborted", errMemInjected)
	case MemClientAbort:
		return 0, fmt.Errorf("%w: %w", errMemInjected, errSilentAbort)
	}
	for _, r := range records {
		r.offset = int64(len(s.records))
		s.records = append(s.records, r)
	}
	close(s.changed)
	s.changed = make(chan struct{})
	if fault == MemLoseAnswer {
		return 0, fmt.Errorf("%w: commit answer lost", errMemInjected)
	}
	return int64(len(s.records) - 1), nil
}

func (w *memWriter) close() error { return nil }

type memReader struct {
	t    *memTransport
	next int64
}

// memPollMax bounds the records one poll returns.
const memPollMax = 4096

func (r *memReader) poll(ctx context.Context) ([]logRecord, error) {
	for {
		batch, changed := r.take()
		if len(batch) > 0 {
			return batch, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// pollNow returns what poll would, without waiting (manual followers).
func (r *memReader) pollNow() []logRecord {
	batch, _ := r.take()
	return batch
}

// take returns the records after the cursor and, under the same lock, the
// channel closed at the next commit.
func (r *memReader) take() ([]logRecord, <-chan struct{}) {
	r.t.m.mu.Lock()
	defer r.t.m.mu.Unlock()
	s := r.t.m.shard(r.t.shard)
	if r.next >= int64(len(s.records)) {
		return nil, s.changed
	}
	batch := slices.Clone(s.records[r.next:min(r.next+memPollMax, int64(len(s.records)))])
	r.next += int64(len(batch))
	return batch, s.changed
}

func (r *memReader) close() {}
