package group_test

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/capgate/capgate/coordinator/group"
)

// TestUnsafeReadyIsRefused: with a safety bug planted (partition records
// left out of Persist), the join that grants epoch 1 mentions an epoch
// never persisted; Ready returns ErrUnsafe and nothing to persist or
// send, and keeps doing so: the machine is not to be used again.
func TestUnsafeReadyIsRefused(t *testing.T) {
	cfg := group.DefaultConfig()
	cfg.InitialAssignDelay = 0 // the join grants at once
	m, err := group.New(cfg, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	m.Step(t0, group.Topics{Partitions: map[string]int32{"t": 2}})
	if _, err := m.Ready(); err != nil {
		t.Fatalf("safe Ready refused: %v", err)
	}
	m.Advance()
	m.PlantUnsafeReady()
	m.Step(t0, group.Join{Ref: 1, Group: "g", Topics: []string{"t"}})
	for i := range 2 {
		rd, err := m.Ready()
		if !errors.Is(err, group.ErrUnsafe) {
			t.Fatalf("Ready %d: err %v, want ErrUnsafe", i, err)
		}
		if len(rd.Persist)+len(rd.Messages) != 0 {
			t.Fatalf("Ready %d: refused Ready still carries %d records and %d messages", i, len(rd.Persist), len(rd.Messages))
		}
	}
	if err := m.CheckInvariants(); err == nil {
		t.Fatal("CheckInvariants does not report the violation")
	}
}
