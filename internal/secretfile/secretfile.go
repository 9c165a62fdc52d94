// Package secretfile is the one rule for files that hold a secret — a
// private key, a key-encryption key: like an ssh key, only their owner
// may read or write them; a file with any group or other permission bit
// is refused, naming the file and its mode.
package secretfile

import (
	"fmt"
	"io"
	"io/fs"
	"os"
)

// Check refuses the secret file path whose mode (info, from a Stat of
// the path or, better, of the opened file) lets its group or others in:
// "key.pem has mode -rw-r--r--, want 0600".
func Check(path string, info fs.FileInfo) error {
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return &ModeError{Path: path, Mode: perm}
	}
	return nil
}

// ModeError is Check's refusal: the file's group or others may read or
// write it.
type ModeError struct {
	Path string
	Mode fs.FileMode
}

func (e *ModeError) Error() string { return fmt.Sprintf("%s has mode %v, want 0600", e.Path, e.Mode) }

// Read opens the secret file path, checks the mode of what it opened (no
// gap between the check and the read for a rename to slip into) and reads
// it whole, at most maxBytes (a key file is small; a larger one is refused
// rather than read into memory).
func Read(path string, maxBytes int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := Check(path, info); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, maxBytes+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > maxBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes: not a key file", path, maxBytes)
	}
	return b, nil
}
