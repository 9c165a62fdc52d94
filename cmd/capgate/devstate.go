package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// The two coordinator states a dev data directory can hold, each only
// read by its own mode: one coordinator keeps badger in coordinator/
// (internal/stack names the first coordinator's data dir so), replicas
// keep the log in the embedded Kafka (kafka/) sealed with state.kek
// (internal/stack's kekFile). The records of kafka/ serve both.
const (
	devBadgerDir = "coordinator"
	devKEKFile   = "state.kek"
)

// devStateMode says which coordinator states dir holds.
type devStateMode struct {
	single, replicated bool
}

func readDevStateMode(dir string) (devStateMode, error) {
	var m devStateMode
	entries, err := os.ReadDir(filepath.Join(dir, devBadgerDir))
	switch {
	case err == nil:
		m.single = len(entries) > 0
	case !errors.Is(err, os.ErrNotExist):
		return m, fmt.Errorf("dev: data dir: %w", err)
	}
	_, err = os.Stat(filepath.Join(dir, devKEKFile))
	switch {
	case err == nil:
		m.replicated = true
	case !errors.Is(err, os.ErrNotExist):
		return m, fmt.Errorf("dev: data dir: %w", err)
	}
	return m, nil
}

// checkDevStateMode refuses a start that would run the coordinator(s) on
// an empty state while dir holds the other mode's: the groups, offsets,
// keys and credentials' signing keys seem gone, although a start in the
// other mode still has them. Refused rather than warned: a dev stack
// that looks empty is easy to take for a lost state, and the fix is one
// flag (or another --data-dir for a fresh start). When dir holds both
// (switched before this check existed), each mode has its own state and
// the start goes on; note says which one this run leaves unused.
func checkDevStateMode(dir string, replicas int) (note string, err error) {
	m, err := readDevStateMode(dir)
	if err != nil {
		return "", err
	}
	badger, kek := filepath.Join(dir, devBadgerDir), filepath.Join(dir, devKEKFile)
	switch {
	case replicas > 0 && m.single && !m.replicated:
		return "", fmt.Errorf("dev: %s holds the state of one coordinator (%s) and none of replicas: "+
			"--replicas %d would start them on an empty state (no groups, offsets or keys). "+
			"Run capgate dev without --replicas to use it; for replicas from scratch pick another --data-dir "+
			"(or remove %s to drop that state and keep the records)", dir, badger, replicas, badger)
	case replicas == 0 && m.replicated && !m.single:
		return "", fmt.Errorf("dev: %s holds the state of coordinator replicas (the log in the embedded Kafka, sealed with %s) "+
			"and none of one coordinator: without --replicas it would start on an empty state (no groups, offsets or keys). "+
			"Run capgate dev --replicas N to use it; for one coordinator from scratch pick another --data-dir", dir, kek)
	case replicas > 0 && m.single:
		return fmt.Sprintf("%s also holds the state of one coordinator (%s); this run uses the replicas' (%s), run without --replicas for the other", dir, badger, kek), nil
	case replicas == 0 && m.replicated:
		return fmt.Sprintf("%s also holds the state of coordinator replicas (%s); this run uses one coordinator's (%s), run with --replicas N for the other", dir, kek, badger), nil
	}
	return "", nil
}
