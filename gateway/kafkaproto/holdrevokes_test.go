package kafkaproto

import (
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client/session"
)

// TestRevokeToldAgainKeepsItsClock: a revoke the listener already holds
// for its Kafka client (waiting for the client to give the partition up,
// within the rebalance timeout) told again — a heartbeat resync after a
// lost answer re-sends every unreleased revoke — keeps the time it was
// first held: re-holding it from now restarted the partition's
// rebalance-timeout clock on every resync.
func TestRevokeToldAgainKeepsItsClock(t *testing.T) {
	p := session.Partition{Topic: "t", Partition: 1}
	ref := api.PartitionRef{Topic: "t", Partition: 1, Epoch: 3}
	m := &member{state: memberActive, sent: []session.Partition{p},
		deferred: map[session.Partition]deferredRevoke{}, refencing: map[session.Partition]refenceMark{}}
	first := time.Unix(1000, 0)
	if now := m.holdRevokes([]api.PartitionRef{ref}, first); len(now) != 0 {
		t.Fatalf("a revoke of a partition the client holds stepped at once: %v", now)
	}
	if now := m.holdRevokes([]api.PartitionRef{ref}, first.Add(5*time.Second)); len(now) != 0 {
		t.Fatalf("the revoke told again stepped at once: %v", now)
	}
	if d := m.deferred[p]; !d.at.Equal(first) || d.ref != ref {
		t.Fatalf("held %+v, want the revoke held since %v", d, first)
	}
	newer := api.PartitionRef{Topic: "t", Partition: 1, Epoch: 4}
	m.holdRevokes([]api.PartitionRef{newer}, first.Add(6*time.Second))
	if d := m.deferred[p]; d.ref != newer {
		t.Fatalf("a revoke of a later epoch did not replace the held one: %+v", d)
	}
}
