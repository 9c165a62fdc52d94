package store_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capgate/capgate/store"
)

// A data_dir that is a new ext4 volume's mount point holds lost+found and
// nothing else (a Kubernetes PersistentVolume mounted at data_dir): a new
// coordinator state starts there, as in an empty directory. Another file
// beside it is still refused. Before, the volume was refused as holding
// other files (lost+found).
func TestDataDirOfANewVolumeOpens(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "lost+found"), 0o700); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatalf("a new volume's mount point (lost+found only): %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	other := t.TempDir()
	for _, name := range []string{"lost+found", "credentials.json"} {
		if err := os.Mkdir(filepath.Join(other, name), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := store.Open(other, store.Options{}); err == nil || !strings.Contains(err.Error(), "holds other files (credentials.json)") {
		t.Fatalf("a volume holding another file: %v, want refused naming credentials.json alone", err)
	}
}
