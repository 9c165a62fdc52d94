package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capgate/capgate/store"
)

// TestCoordinatorDataDirMistakes: `capgate coordinator` whose data_dir
// is capgate dev's --data-dir (credentials, coordinator/, kafka/) refuses
// to start, naming the dev's coordinator state — it started a new, empty
// state there, badger's files among the dev's —, and writes nothing
// there; one whose data_dir another process has open says so and what to
// do (it said only badger's "Cannot acquire directory lock").
func TestCoordinatorDataDirMistakes(t *testing.T) {
	dev := t.TempDir()
	devState := filepath.Join(dev, "coordinator")
	s, err := store.Open(devState, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dev, "credentials.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ dataDir, want string }{
		{dev, "it looks like capgate dev's --data-dir: its coordinator's state is " + devState},
		{devState, "another coordinator, or a capgate dev, has " + devState + " open"},
	}
	for _, c := range cases {
		path := filepath.Join(t.TempDir(), "c.yaml")
		yaml := fmt.Sprintf("coordinator:\n  listen: 127.0.0.1:0\n  data_dir: %s\n", c.dataDir)
		if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := executeStopped([]string{"coordinator", "--config", path}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("data_dir %s: %v, want %q", c.dataDir, err, c.want)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dev, "MANIFEST")); err == nil {
		t.Error("a database was made in capgate dev's --data-dir")
	}
}
