package client

import (
	"testing"
	"time"
)

// TestHeartbeatFailuresLogBounded: while the coordinator is down, the
// first failed heartbeat is logged, then one line per unansweredLogEvery
// saying how many were not; the first answer after them reports the
// streak once.
func TestHeartbeatFailuresLogBounded(t *testing.T) {
	var b beatFailures
	now := time.Now()
	if log, missed := b.failed(now); !log || missed != 0 {
		t.Fatalf("first failure: log %v missed %d, want logged", log, missed)
	}
	for i := 1; i <= 9; i++ {
		if log, _ := b.failed(now.Add(time.Duration(i) * time.Second)); log {
			t.Fatalf("failure %d within %v logged", i, unansweredLogEvery)
		}
	}
	if log, missed := b.failed(now.Add(unansweredLogEvery)); !log || missed != 9 {
		t.Fatalf("after %v: log %v missed %d, want logged with 9 not logged", unansweredLogEvery, log, missed)
	}
	if ok, failures, since := b.answered(); !ok || failures != 11 || !since.Equal(now) {
		t.Fatalf("answered: %v %d %v, want the streak of 11 since the first", ok, failures, since)
	}
	if ok, _, _ := b.answered(); ok {
		t.Fatal("a second answer reported a streak again")
	}
	if log, _ := b.failed(now.Add(unansweredLogEvery + time.Second)); !log {
		t.Fatal("the first failure after an answer was not logged")
	}
}
