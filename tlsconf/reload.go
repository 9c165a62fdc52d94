package tlsconf

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/capgate/capgate/internal/secretfile"
)

// maxFileBytes bounds one PEM file read (a chain of a few certificates
// is a few KiB).
const maxFileBytes = 1 << 20

// file is one file of a set; a private one (a key) must be its owner's
// alone (internal/secretfile), checked on the opened file each time the
// set is read — at start and at every reload check.
type file struct {
	path    string
	private bool
}

// reloader holds the value parsed from a set of files and replaces it
// when their contents change. Checks are lazy: get re-reads the files
// when interval has passed since the last check, and only one caller
// does so at a time (the others keep using the current value). A set
// that cannot be read (missing, a key readable by others) or fails to
// parse (half-written, key and certificate disagreeing) leaves the
// current value in place and is logged once per distinct content or
// error. Each value loaded (at start, on a reload) whose certificate
// is expired or not valid yet is logged too: it is served, but clients
// that verify it will refuse it.
type reloader[T any] struct {
	files    []file
	paths    []string // of files, for logs
	interval time.Duration
	now      func() time.Time
	parse    func(contents [][]byte) (*T, error)
	leaf     func(*T) *x509.Certificate // the certificate a value presents
	log      *zap.Logger

	current atomic.Pointer[T]
	checked atomic.Int64 // unix ns of the last check

	mu      sync.Mutex // one reload at a time; guards the digests
	digest  [sha256.Size]byte
	refused [sha256.Size]byte
}

func newReloader[T any](files []file, interval time.Duration, log *zap.Logger, parse func([][]byte) (*T, error), leaf func(*T) *x509.Certificate) (*reloader[T], error) {
	r := &reloader[T]{files: files, interval: interval, now: time.Now, parse: parse, leaf: leaf, log: log}
	for _, f := range files {
		if f.path != "" {
			r.paths = append(r.paths, f.path)
		}
	}
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
	r.checkValidity(v)
	return r, nil
}

// checkValidity warns when the certificate of v is expired or not
// valid yet at the reloader's clock.
func (r *reloader[T]) checkValidity(v *T) {
	leaf := r.leaf(v)
	if leaf == nil {
		return
	}
	now := r.now()
	fields := []zap.Field{zap.Strings("files", r.paths), zap.String("subject", leaf.Subject.String()),
		zap.Time("not_before", leaf.NotBefore), zap.Time("not_after", leaf.NotAfter)}
	switch {
	case now.After(leaf.NotAfter):
		r.log.Warn("tls: certificate expired; serving it, but clients that verify it refuse it", fields...)
	case now.Before(leaf.NotBefore):
		r.log.Warn("tls: certificate not valid yet; serving it, but clients that verify it refuse it", fields...)
	}
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
		r.refused = [sha256.Size]byte{} // a refusal that comes back is logged again
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
	r.digest, r.refused = digest, [sha256.Size]byte{}
	r.log.Info("tls: files reloaded", zap.Strings("files", r.paths))
	r.checkValidity(v)
	return true, nil
}

// read reads every file and digests them together (length-prefixed);
// when one cannot be read, the digest is the error's, so each distinct
// failure is logged once.
func (r *reloader[T]) read() ([][]byte, [sha256.Size]byte, error) {
	h := sha256.New()
	contents := make([][]byte, len(r.files))
	for i, f := range r.files {
		if f.path == "" {
			continue
		}
		b, err := readBounded(f.path, f.private)
		if err != nil {
			return nil, sha256.Sum256([]byte(err.Error())), err
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

// readBounded reads path, at most maxFileBytes; a private file is
// refused when its group or others may read it (checked on the opened
// file: what is read is what was checked).
func readBounded(path string, private bool) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	defer f.Close()
	if private {
		info, err := f.Stat()
		if err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
		if err := secretfile.Check(path, info); err != nil {
			return nil, fmt.Errorf("tls: key file %w", err)
		}
	}
	b, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("tls: read %s: %w", path, err)
	}
	if len(b) > maxFileBytes {
		return nil, fmt.Errorf("tls: %s is larger than %d bytes", path, maxFileBytes)
	}
	return b, nil
}
