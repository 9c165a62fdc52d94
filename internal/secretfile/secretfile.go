// Package secretfile is the one rule for files that hold a secret — a
// private key, a key-encryption key: like an ssh key, only their owner
// may read or write them; a file with any group or other permission bit
// is refused, naming the file and its mode.
package secretfile

import (
	"fmt"
	"io/fs"
)

// Check refuses the secret file path whose mode (info, from a Stat of
// the path or, better, of the opened file) lets its group or others in:
// "key.pem has mode -rw-r--r--, want 0600".
func Check(path string, info fs.FileInfo) error {
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("%s has mode %v, want 0600", path, perm)
	}
	return nil
}
