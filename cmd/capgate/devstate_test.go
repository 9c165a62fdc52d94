package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
)

// TestDevRefusesToSwitchStateMode: `capgate dev` on a data dir that holds
// the other mode's coordinator state — one coordinator's badger when
// started with --replicas, the replicas' Kafka log without — is refused,
// saying how to use the state and how to start fresh, and starts nothing
// (no empty state is made beside it). It started on an empty state, and
// the groups and offsets seemed lost.
func TestDevRefusesToSwitchStateMode(t *testing.T) {
	cases := []struct {
		name          string
		first, second int // --replicas of the two starts
		want          []string
		notMade       string
	}{
		{"one coordinator, then replicas", 0, 1, []string{"holds the state of one coordinator", "--replicas 1 would start them on an empty state",
			"Run capgate dev without --replicas to use it", "another --data-dir"}, devKEKFile},
		{"replicas, then one coordinator", 1, 0, []string{"holds the state of coordinator replicas", devKEKFile,
			"without --replicas it would start on an empty state", "Run capgate dev --replicas N to use it", "another --data-dir"}, devBadgerDir},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			f := devFlags{dataDir: dir, logLevel: "error", brokerAddr: "127.0.0.1:0", coordinatorAddr: "127.0.0.1:0", gatewayAddr: "127.0.0.1:0", replicas: c.first}
			dev, err := startDev(context.Background(), f, zap.NewNop())
			if err != nil {
				t.Fatal(err)
			}
			if err := dev.Close(); err != nil {
				t.Fatal(err)
			}
			f.replicas = c.second
			dev, err = startDev(context.Background(), f, zap.NewNop())
			if err == nil {
				dev.Close()
				t.Fatal("capgate dev switched the state mode of a data dir: it started on an empty state")
			}
			for _, want := range append(c.want, dir) {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error lacks %q: %v", want, err)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, c.notMade)); err == nil {
				t.Errorf("the refused start made %s", c.notMade)
			}
			// The same mode again still starts on its state.
			f.replicas = c.first
			dev, err = startDev(context.Background(), f, zap.NewNop())
			if err != nil {
				t.Fatalf("a restart in the same mode: %v", err)
			}
			dev.Close()
		})
	}
}

// TestDevStateModeBothPresent: a data dir holding both states (switched
// before the check existed) starts in either mode, with a note naming the
// state it leaves unused.
func TestDevStateModeBothPresent(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, devBadgerDir), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{filepath.Join(devBadgerDir, "MANIFEST"), devKEKFile} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for replicas, want := range map[int]string{0: "also holds the state of coordinator replicas", 3: "also holds the state of one coordinator"} {
		note, err := checkDevStateMode(dir, replicas)
		if err != nil || !strings.Contains(note, want) {
			t.Errorf("--replicas %d: note %q, err %v; want %q", replicas, note, err, want)
		}
	}
	if note, err := checkDevStateMode(t.TempDir(), 3); note != "" || err != nil {
		t.Errorf("an empty dir: note %q, err %v", note, err)
	}
}
