package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// devLockFile, in the data dir, is held (flock) by the capgate dev that
// uses the dir, from before anything in it is opened until the stack is
// closed. Without it a second capgate dev on the same dir found out only
// when badger refused its directory lock ("Cannot acquire directory
// lock") — after its embedded Kafka had already opened and rewritten the
// running one's partition snapshots under kafka/. The kernel drops the
// lock when the process ends, so a crash never leaves a stale one; the
// pid written into the file is only for the message.
const devLockFile = ".capgate-dev.lock"

// lockDevDir takes the data dir's lock, or says which process holds it.
func lockDevDir(dir string) (unlock func(), err error) {
	path := filepath.Join(dir, devLockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("dev: data dir lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := make([]byte, 32)
		n, _ := f.ReadAt(holder, 0)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			who := "another process"
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(holder[:n]))); perr == nil && pid > 0 {
				who = "process " + strconv.Itoa(pid)
			}
			return nil, fmt.Errorf("dev: data dir %s is in use by another capgate dev (%s): stop it first, or pass another --data-dir", dir, who)
		}
		return nil, fmt.Errorf("dev: data dir lock: %w", err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() { f.Close() }, nil // closing the file drops the lock
}
