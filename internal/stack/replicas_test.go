package stack

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
)

// TestStackReplicas: three in-process coordinator replicas on a 3-broker
// kfake, the state in the Kafka log; one leads, the gateway syncs with
// it through the URL list; the leader is killed, another takes over with
// the group, and the gateway acks the new leader's sync sequence.
func TestStackReplicas(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := Start(ctx, Options{Dir: t.TempDir(), Topics: map[string]int32{"orders": 2}, Brokers: 3,
		Coordinators: 3, Gateways: 1, Timing: TestTiming(), Logger: func(part string) *zap.Logger { return zaptest.NewLogger(t).Named(part) }})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}()
	first, err := s.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.CoordinatorURL() != first.URL {
		t.Fatalf("CoordinatorURL %s, the leader is %s", s.CoordinatorURL(), first.URL)
	}
	if _, err := s.ClientCredential(ctx, "test", []string{"g"}, []string{"orders"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := s.MustAdmin(ctx, "PUT", "/v1/admin/groups/g/config", map[string]any{"max_moves_per_second": 5}, nil); err != nil {
		t.Fatal(err)
	}

	first.Kill()
	second, err := s.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if second == first {
		t.Fatal("the killed replica still leads")
	}
	if _, err := s.Describe(ctx, "g"); err != nil {
		t.Fatalf("the group is gone after the takeover: %v", err)
	}
	seq, err := s.SyncSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ok, why, err := s.Acked(ctx, seq)
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway did not sync with the new leader: %s %v", why, err)
		}
	}
	if err := first.Start(ctx); err != nil { // back as a standby
		t.Fatal(err)
	}
	if co, err := s.WaitLeader(ctx); err != nil || co != second {
		t.Fatalf("leader after the restart: %v %v, want %s", co, err, second.Name)
	}
}
