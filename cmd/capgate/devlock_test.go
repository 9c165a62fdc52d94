package main

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
)

// TestDevDataDirLocked: a second capgate dev on a data dir in use is
// refused before it opens anything there — before, it got as far as
// badger's directory lock, its embedded Kafka having already opened and
// rewritten the running one's partition files under kafka/. Once the
// first one stops, the dir is free again; kafka/ is the owner's alone.
func TestDevDataDirLocked(t *testing.T) {
	dir := t.TempDir()
	f := devFlags{dataDir: dir, logLevel: "error", brokerAddr: "127.0.0.1:0", coordinatorAddr: "127.0.0.1:0", gatewayAddr: "127.0.0.1:0"}
	first, err := startDev(context.Background(), f, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	kafkaDir := filepath.Join(dir, "kafka")
	if st, err := os.Stat(kafkaDir); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("kafka/: %v, mode %v; want 0700", err, st.Mode().Perm())
	}
	before := snapshot(t, kafkaDir)

	second, err := startDev(context.Background(), f, zap.NewNop())
	if err == nil {
		second.Close()
		t.Fatal("a second capgate dev started on a data dir in use")
	}
	for _, want := range []string{dir, "in use by another capgate dev", "process " + strconv.Itoa(os.Getpid()), "--data-dir"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if after := snapshot(t, kafkaDir); after != before {
		t.Errorf("the refused start touched kafka/:\nbefore %s\nafter  %s", before, after)
	}

	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := startDev(context.Background(), f, zap.NewNop())
	if err != nil {
		t.Fatalf("after the first stopped: %v", err)
	}
	again.Close()
}

// snapshot lists the files under dir with their sizes and modification
// times.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		b.WriteString(path + " " + strconv.FormatInt(info.Size(), 10) + " " + info.ModTime().Format(time.RFC3339Nano) + "\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
