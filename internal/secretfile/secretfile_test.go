package secretfile_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/capgate/capgate/internal/secretfile"
)

func TestCheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "key.pem")
	if err := os.WriteFile(path, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	for mode, want := range map[os.FileMode]string{
		0o600: "", 0o400: "",
		0o644: path + " has mode -rw-r--r--, want 0600",
		0o640: path + " has mode -rw-r-----, want 0600",
		0o602: path + " has mode -rw-----w-, want 0600",
	} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if err := secretfile.Check(path, info); err != nil {
			got = err.Error()
		}
		if got != want {
			t.Errorf("mode %#o: %q, want %q", mode, got, want)
		}
	}
}
