package coordinator_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/store"
)

// useKafkaState switches an env to state: kafka on its embedded broker,
// with a KEK file (0600) outside the data directory.
func useKafkaState(t testing.TB, e *env) {
	t.Helper()
	kek := filepath.Join(t.TempDir(), "kek")
	if err := os.WriteFile(kek, []byte(store.GenerateKEK()), 0o600); err != nil {
		t.Fatal(err)
	}
	e.cfg.State = coordinator.StateKafka
	e.cfg.KafkaState.KEKFile = kek
}

// With state: kafka everything the coordinator persists lives in the log:
// a coordinator started afresh (an empty data directory) restores groups,
// epochs, offsets and the signing keys — a credential minted before still
// works.
func TestKafkaStateSurvivesRestart(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 4})
	e.fill(t, 1000) // commits name offsets up to 1000: the log must reach them
	useKafkaState(t, e)
	h := e.start(t)
	creds := h.clientCredential(t, []string{"g"}, []string{"orders"})
	a := h.join(t, "g", creds, api.JoinRequest{ClientID: "a", Topics: []string{"orders"}})
	for p := range int32(4) {
		if status, body := a.commit(t, "orders", p, 10+int64(p), false); status != 200 {
			t.Fatalf("commit: %d %s", status, body)
		}
	}
	before := h.describe(t, "g")
	h.stop(t)

	e.dir = t.TempDir() // nothing on local disk carries over
	e.cfg.DataDir = e.dir
	h = e.start(t)
	after := h.describe(t, "g")
	if len(after.Partitions) != 4 {
		t.Fatalf("restored %d partitions, want 4", len(after.Partitions))
	}
	for i, p := range after.Partitions {
		b := before.Partitions[i]
		if p.Epoch != b.Epoch || p.Owner != b.Owner || p.Committed == nil || *p.Committed != *b.Committed {
			t.Fatalf("partition %d: before %+v, after %+v", p.Partition, b, p)
		}
	}
	h.join(t, "g", creds, api.JoinRequest{ClientID: "b", Topics: []string{"orders"}}) // same keys
}

// A second coordinator opening the same state deposes the first: the
// first's next persist fails fenced, it fails closed (503, Run returns the
// fenced error), and nothing of its refused batch reaches the log.
func TestKafkaStateDeposedCoordinatorFailsClosed(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 4})
	useKafkaState(t, e)
	first := e.start(t)
	creds := first.clientCredential(t, []string{"g"}, []string{"orders"})
	first.join(t, "g", creds, api.JoinRequest{ClientID: "a", Topics: []string{"orders"}})

	second := e.start(t) // fences the first, reads the log to its end
	status, body, _, err := first.try("POST", "/v1/groups/g/join", creds, api.JoinRequest{ClientID: "zombie", Topics: []string{"orders"}})
	if err != nil || status != 503 {
		t.Fatalf("join at the deposed coordinator: %d %s %v, want 503", status, body, err)
	}
	if err := first.stopErr(); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("deposed coordinator's Run: %v, want ErrFenced", err)
	}
	for _, m := range second.describe(t, "g").Members {
		if m.ClientID == "zombie" {
			t.Fatal("the deposed coordinator's member reached the log")
		}
	}
	second.join(t, "g", creds, api.JoinRequest{ClientID: "b", Topics: []string{"orders"}})
}

// Kafka mode refuses to start without a KEK, or with a world-readable one.
func TestKafkaStateNeedsAPrivateKEK(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	e.cfg.State = coordinator.StateKafka
	if _, err := coordinator.New(e.cfg, e.log, coordinator.WithBroker(e.broker)); err == nil || !strings.Contains(err.Error(), "kek_file or kek_env") {
		t.Fatalf("no KEK: %v", err)
	}
	useKafkaState(t, e)
	if err := os.Chmod(e.cfg.KafkaState.KEKFile, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := coordinator.New(e.cfg, e.log, coordinator.WithBroker(e.broker)); !errors.Is(err, store.ErrKEK) {
		t.Fatalf("world-readable KEK: %v, want ErrKEK", err)
	}
}

func TestStateConfigValidate(t *testing.T) {
	cfg := coordinator.DefaultConfig()
	cfg.State = "etcd"
	if err := cfg.Validate(); err == nil || !strings.HasPrefix(err.Error(), "state:") {
		t.Fatalf("unknown state: %v", err)
	}
	cfg.State = coordinator.StateKafka
	cfg.KafkaState.KEKEnv = "CAPGATE_KEK"
	if err := cfg.Validate(); err != nil {
		t.Fatalf("kafka with a KEK variable: %v", err)
	}
	cfg.KafkaState.Partitions = 3
	if err := cfg.Validate(); err == nil || !strings.HasPrefix(err.Error(), "kafka_state.partitions:") {
		t.Fatalf("3 shards before replicas: %v", err)
	}
}
