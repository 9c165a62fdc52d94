package main

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// watching is watchShutdown on a cancelled context (the first signal),
// its log observed; logged is signalled at each entry, exits carries
// the exit code it would exit with.
func watching(t *testing.T, backstop time.Duration) (logs *observer.ObservedLogs, logged <-chan zapcore.Entry, exits <-chan int, finished func()) {
	t.Helper()
	core, logs := observer.New(zapcore.InfoLevel)
	entries := make(chan zapcore.Entry, 8)
	log := zap.New(core, zap.Hooks(func(e zapcore.Entry) error { entries <- e; return nil }))
	codes := make(chan int, 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	finished = watchShutdown(ctx, log, backstop, func(code int) { codes <- code })
	t.Cleanup(finished)
	return logs, entries, codes, finished
}

// A coordinator's shutdown that outlives its backstop ends the process
// (exit 1, an ERROR saying why) instead of waiting for the orchestrator's
// SIGKILL (newuser2 #0a: 75 s after SIGTERM, only SIGQUIT ended it).
func TestShutdownBackstopExits(t *testing.T) {
	logs, _, exits, _ := watching(t, 50*time.Millisecond)
	select {
	case code := <-exits:
		if code != 1 {
			t.Fatalf("exit %d, want 1", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no exit after the backstop")
	}
	if logs.FilterMessageSnippet("signal received: shutting down").Len() != 1 ||
		logs.FilterLevelExact(zapcore.ErrorLevel).FilterMessageSnippet("still running after its backstop").Len() != 1 {
		t.Fatalf("logs: %+v", logs.All())
	}
}

// A second SIGTERM exits at once (it was swallowed: the first had
// cancelled the context and the second did nothing).
func TestSecondSignalExits(t *testing.T) {
	logs, logged, exits, _ := watching(t, time.Hour)
	<-logged // "signal received": the second signal is watched from here
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-exits:
		if code != 1 {
			t.Fatalf("exit %d, want 1", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second SIGTERM did not end the process")
	}
	if logs.FilterLevelExact(zapcore.WarnLevel).FilterMessageSnippet("second signal").Len() != 1 {
		t.Fatalf("logs: %+v", logs.All())
	}
}

// A shutdown that finishes stops the watch: no exit.
func TestFinishedShutdownDoesNotExit(t *testing.T) {
	_, logged, exits, finished := watching(t, time.Hour)
	<-logged
	finished()
	finished() // twice is fine (the command's defer)
	select {
	case code := <-exits:
		t.Fatalf("exit %d after the shutdown finished", code)
	default:
	}
}
