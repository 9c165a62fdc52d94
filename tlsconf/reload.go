package tlsconf

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// maxFileBytes bounds one PEM file read (a chain of a few certificates
// is a few KiB).
const maxFileBytes = 1 << 20

// reloader holds the value parsed from a set of files and replaces it
// when their contents change. Checks are lazy: get re-reads the files
// when interval has passed since the last check, and only one caller
// does so at a time (the others keep using the current value). A set
// that fails to parse (half-written, key and certificate disagreeing)
// leaves the current value in place and is logged once per distinct
// content.
type reloader[T any] struct {
	paths    []string
	interval time.Duration
	now      func() time.Time
	parse    func(contents [][]byte) (*T, error)
	log      *zap.Logger

	current atomic.Pointer[T]
	checked atomic.Int64 // unix ns of the last check

	mu      sync.Mutex // one reload at a time; guards the digests
	digest  [sha256.Size]byte
	refused [sha256.Size]byte
}

func newReloader[T any](paths []string, interval time.Duration, log *zap.Logger, parse func([][]byte) (*T, error)) (*reloader[T], error) {
	r := &reloader[T]{paths: paths, interval: interval, now: time.Now, parse: parse, log: log}
	contents, digest, err := r.read()
	if err != nil {
		return nil, err
	}
	v, err := parse(contents)
	if err != nil {
		return nil, err
	}
	r.current.Store(v)
	r.digest = digest
	r.checked.Store(r.now().UnixNano())
	return r, nil
}

// get returns the current value, reloading first when it is due.
func (r *reloader[T]) get() *T {
	now := r.now().UnixNano()
	if now-r.checked.Load() >= int64(r.interval) && r.mu.TryLock() {
		r.checked.Store(now)
		r.reloadLocked()
		r.mu.Unlock()
	}
	return r.current.Load()
}

// Reload re-reads the files now; it reports whether the value changed
// and why a changed set was refused.
func (r *reloader[T]) Reload() (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checked.Store(r.now().UnixNano())
	return r.reloadLocked()
}

func (r *reloader[T]) reloadLocked() (bool, error) {
	contents, digest, err := r.read()
	if err == nil && digest == r.digest {
		return false, nil
	}
	var v *T
	if err == nil {
		v, err = r.parse(contents)
	}
	if err != nil {
		if digest != r.refused {
			r.refused = digest
			r.log.Warn("tls: changed files refused; still serving the previous ones", zap.Strings("files", r.paths), zap.Error(err))
		}
		return false, err
	}
	r.current.Store(v)
	r.digest = digest
	r.log.Info("tls: files reloaded", zap.Strings("files", r.paths))
	return true, nil
}

// read reads every file and digests them together (length-prefixed).
func (r *reloader[T]) read() ([][]byte, [sha256.Size]byte, error) {
	h := sha256.New()
	contents := make([][]byte, len(r.paths))
	for i, p := range r.paths {
		if p == "" {
			continue
		}
		b, err := readBounded(p)
		if err != nil {
			return nil, [sha256.Size]byte{}, err
		}
		contents[i] = b
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	var d [sha256.Size]byte
	h.Sum(d[:0])
	return contents, d, nil
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("tls: read %s: %w", path, err)
	}
	if len(b) > maxFileBytes {
		return nil, fmt.Errorf("tls: %s is larger than %d bytes", path, maxFileBytes)
	}
	return b, nil
}
