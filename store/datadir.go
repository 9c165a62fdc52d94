package store

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// checkDataDir refuses a directory that holds files but no badger
// database (no MANIFEST) before badger writes its own files among them:
// pointed at capgate dev's --data-dir (credentials, coordinator/, kafka/)
// or a home or project directory, the coordinator started a new, empty
// state there and scattered a database beside the files it found. A
// missing or empty directory is a new state, as before; so is one holding
// only lost+found (a new ext4 volume mounted at data_dir).
func checkDataDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) == 0 {
		return nil // missing: made by Open; unreadable: badger says so
	}
	var names []string
	for _, e := range entries {
		switch e.Name() {
		case "MANIFEST":
			return nil
		case "lost+found":
			// A file system's own: a new ext4 volume mounted at data_dir
			// (a Kubernetes PersistentVolume) holds it and nothing else.
			continue
		}
		names = append(names, e.Name())
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	shown := names[:min(len(names), 5)]
	list := strings.Join(shown, ", ")
	if len(names) > len(shown) {
		list += fmt.Sprintf(", … (%d in all)", len(names))
	}
	hint := "point coordinator.data_dir at the directory its state is in, or at a new or empty one for a new coordinator"
	if st, err := os.Stat(filepath.Join(dir, "coordinator", "MANIFEST")); err == nil && !st.IsDir() {
		hint = "it looks like capgate dev's --data-dir: its coordinator's state is " + filepath.Join(dir, "coordinator") +
			" (stop capgate dev first); a new or empty directory starts a new coordinator"
	}
	return fmt.Errorf("store: open %s: the directory holds other files (%s) and no coordinator state (no badger MANIFEST): %s", dir, list, hint)
}

// lockedHint says what to do when another process holds dir's database.
func lockedHint(dir string, err error) error {
	if !strings.Contains(err.Error(), "Cannot acquire directory lock") {
		return err
	}
	return fmt.Errorf("%w\n(another coordinator, or a capgate dev, has %s open: stop it, or give this one a data_dir of its own)", err, dir)
}
