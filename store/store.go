package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"go.uber.org/zap"
)

// Options configure Open.
type Options struct {
	// Logger receives badger's warnings and errors; nil discards them.
	Logger *zap.Logger
	// InMemory keeps everything in memory and ignores dir. For benchmarks
	// only: nothing survives Close.
	InMemory bool
}

// Badger sizing for a small (2-core) box. One transaction may hold at most
// 15% of a memtable, in bytes and in entries (96 bytes of skiplist node
// each), so memTableSize fixes the largest atomic batch:
// 4.8 MiB and 52,426 records (MaxBatchRecords), enough for 10,000
// partitions' epoch and state together. Every backend enforces the same
// bounds (Writer.count), so a Ready that fits one fits all.
const (
	memTableSize     = 32 << 20
	blockCacheSize   = 8 << 20
	valueLogFileSize = 64 << 20
	numCompactors    = 2
	numMemtables     = 2

	// MappedBytes is what the store keeps mapped into memory beside the
	// Go heap, at most: badger's write-ahead logs (one per memtable). The
	// data it has written is mapped too, as its tables are read; it is
	// the size of the state the coordinator holds.
	MappedBytes = numMemtables * memTableSize

	// MaxBatchRecords is the most records (puts and deletes) one Update
	// can hold; more gives ErrBatchTooBig. It is badger's entry bound less
	// the entry badger adds to every transaction for its commit marker.
	// MaxBatchBytes (keys, values and 12 bytes of overhead per record,
	// less 64 bytes per batch) is the other bound.
	MaxBatchRecords = MaxBatchBytes/96 - 2
	MaxBatchBytes   = 15 * memTableSize / 100
)

// Store is the durable coordinator state. Safe for concurrent use.
type Store struct {
	dir      string
	inMemory bool

	// writeMu serialises Updates, so the checks of one batch (epoch,
	// offset, seq regressions) read the result of the previous batch.
	writeMu sync.Mutex

	// closeMu guards closed and db: every operation holds it for reading,
	// Close for writing.
	closeMu sync.RWMutex
	closed  bool
	db      *badger.DB

	// epochs holds stored epoch values (their encoding) by key, as
	// committed, for the Writer's regression check (PutEpoch reads the
	// stored epoch of every partition it raises): a badger read looks
	// through every memtable and level, ~2–4 µs, and a revoke of a member
	// holding 10,000 partitions reads 10,000 (BenchmarkBulkRevokeBatch).
	// Guarded by writeMu. Filled by the reads and commits of Update only —
	// the only writer of the database — so an entry is the committed value;
	// a failed commit empties it (what reached the disk is unknown). At
	// most epochCacheMax entries: past it keys are read from badger.
	epochs      map[string][]byte
	epochMisses int // epoch reads the cache did not answer (tests)
}

// epochCacheMax bounds Store.epochs (~130 B an entry: ~34 MB full).
const epochCacheMax = 1 << 18

// Open opens (creating if needed) the store in dir. The directory is made
// 0700 and every file in it 0600: the signing keys live there.
func Open(dir string, opts Options) (*Store, error) {
	bopts := badgerOptions(dir, opts)
	if !opts.InMemory {
		if err := checkDataDir(dir); err != nil {
			return nil, err
		}
		privateFiles()
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("store: open %s: %w", dir, err)
		}
		if err := restrictPermissions(dir); err != nil {
			return nil, fmt.Errorf("store: open %s: %w", dir, err)
		}
	}
	db, err := badger.Open(bopts)
	if err != nil {
		return nil, lockedHint(dir, fmt.Errorf("store: open %s: %w", dir, err))
	}
	s := &Store{dir: dir, inMemory: opts.InMemory, db: db}
	if err := s.checkLayout(); err != nil {
		return nil, errors.Join(err, db.Close())
	}
	if !opts.InMemory {
		// Badger's lock file and memory-mapped files are created
		// 0666&^umask; tighten them now that they exist.
		if err := restrictPermissions(dir); err != nil {
			return nil, errors.Join(fmt.Errorf("store: open %s: %w", dir, err), db.Close())
		}
	}
	return s, nil
}

func badgerOptions(dir string, opts Options) badger.Options {
	logger := opts.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	bopts := badger.DefaultOptions(dir)
	if opts.InMemory {
		bopts = badger.DefaultOptions("").WithInMemory(true)
	}
	return bopts.
		WithSyncWrites(!opts.InMemory).
		WithLogger(badgerLogger{logger.Named("badger").Sugar()}).
		WithMemTableSize(memTableSize).
		WithNumMemtables(numMemtables).
		WithNumCompactors(numCompactors).
		WithNumGoroutines(2).
		WithBlockCacheSize(blockCacheSize).
		WithCompression(options.None).
		WithValueLogFileSize(valueLogFileSize).
		WithMetricsEnabled(false).
		WithDetectConflicts(false) // writers are serialised by writeMu
}

// checkLayout writes the layout version into a new store and refuses one
// written with another layout.
func (s *Store) checkLayout() error {
	return s.db.Update(func(txn *badger.Txn) error {
		value, found, err := badgerBatch{txn}.get([]byte(prefixLayout))
		if err != nil {
			return fmt.Errorf("store: open: read layout: %w", err)
		}
		if !found {
			return txn.Set([]byte(prefixLayout), encodeUint(layoutBase))
		}
		return checkLayoutValue(value)
	})
}

// Close flushes the memtable to disk and closes the store. Later calls
// return ErrClosed.
func (s *Store) Close() error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return fmt.Errorf("store: close: %w", ErrClosed)
	}
	s.closed = true
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("store: close: %w", err)
	}
	if s.inMemory {
		return nil
	}
	if err := restrictPermissions(s.dir); err != nil {
		return fmt.Errorf("store: close: %w", err)
	}
	return nil
}

// restrictPermissions makes dir 0700 and every file under it 0600 (files
// left by an earlier run, or by a process with a wider umask); files
// badger creates while the store is open are 0600 by the umask
// privateFiles sets.
func restrictPermissions(dir string) error {
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	return filepath.WalkDir(dir, func(path string, entry fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return ignoreGone(err)
		case path == dir:
			return nil
		case entry.IsDir():
			return ignoreGone(os.Chmod(path, 0o700))
		case entry.Type().IsRegular():
			return ignoreGone(os.Chmod(path, 0o600))
		}
		return nil
	})
}

// ignoreGone drops the error of a file that vanished during the walk:
// the second walk of Open runs while badger is open, and its compactor
// deletes tables (seen: a coordinator restarted right after kill -9
// failed "chmod …/000005.sst: no such file or directory").
func ignoreGone(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// badgerLogger routes badger's warnings and errors to zap and drops its
// info and debug chatter.
type badgerLogger struct{ log *zap.SugaredLogger }

func (l badgerLogger) Errorf(format string, args ...any)   { l.log.Errorf(trimNewline(format), args...) }
func (l badgerLogger) Warningf(format string, args ...any) { l.log.Warnf(trimNewline(format), args...) }
func (l badgerLogger) Infof(string, ...any)                {}
func (l badgerLogger) Debugf(string, ...any)               {}

func trimNewline(format string) string {
	if n := len(format); n > 0 && format[n-1] == '\n' {
		return format[:n-1]
	}
	return format
}
