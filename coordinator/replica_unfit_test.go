package coordinator_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/store"
)

// A misconfigured replica — the wrong KEK, or another coordinator id (the
// issuer) — joins three good ones (redteam2 K and K′). Started on the
// log, it refuses to start (Run's error names both values). Started
// without that check, it is no standby: /readyz 503 "unfit" naming both
// values (KEK fingerprints, ids), the unfit metric 1. Then the leader
// stops: a GOOD replica takes over —
// members heartbeat it with their member tokens, a credential minted
// before joins, a new credential mints — and the misconfigured one never
// attempted a takeover.
//
// Its replica id is picked so its stagger is the shortest of all: it is
// the first to notice the silence. Before the fix, with the wrong KEK it
// fenced the shard and committed a barrier, failed to open the key ring,
// and tried again every lease — each barrier read by the good followers
// as a live leader, so none ever stood (no leader at all); with another
// id it took over and every credential was refused "wrong issuer".
func TestMisconfiguredStandbyNeverBlocksTheFailover(t *testing.T) {
	for _, tc := range []struct {
		name string
		// edit misconfigures the replica; want are what its 503 names.
		edit func(t *testing.T, e *env) (edit func(*coordinator.Config), want []string)
	}{
		{"wrong KEK", func(t *testing.T, e *env) (func(*coordinator.Config), []string) {
			good, err := store.LoadKEKFile(e.cfg.KafkaState.KEKFile)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "other.kek")
			if err := os.WriteFile(path, []byte(store.GenerateKEK()), 0o600); err != nil {
				t.Fatal(err)
			}
			bad, err := store.LoadKEKFile(path)
			if err != nil {
				t.Fatal(err)
			}
			return func(cfg *coordinator.Config) { cfg.KafkaState.KEKFile = path }, []string{good.ID(), bad.ID()}
		}},
		{"other coordinator id", func(t *testing.T, e *env) (func(*coordinator.Config), []string) {
			typo := e.cfg.ID + "-typo"
			return func(cfg *coordinator.Config) { cfg.ID = typo }, []string{`"` + e.cfg.ID + `"`, `"` + typo + `"`, "issuer"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnvBrokers(t, map[string]int32{"orders": 2}, 3)
			useKafkaState(t, e)
			s := startReplicas(t, e, 3)
			first := s.awaitLeader(t)
			h := s.harness(first)
			creds := h.clientCredential(t, []string{"g"}, []string{"orders"})
			m := h.join(t, "g", creds, api.JoinRequest{ClientID: "a", Topics: []string{"orders"}, SessionTimeoutMs: 20000})

			edit, want := tc.edit(t, e)
			id := firstToStand(t, "replica-0", "replica-1", "replica-2")
			misconfigure := func(cfg *coordinator.Config) { edit(cfg); cfg.Replica.ID = id }

			// Started on a log that shows the mismatch: it refuses to start.
			s.startEdited(t, 3, misconfigure, nil)
			select {
			case err := <-s.done[3]:
				if !errors.Is(err, store.ErrIncompatible) {
					t.Fatalf("Run: %v, want ErrIncompatible", err)
				}
				for _, w := range want {
					if !strings.Contains(err.Error(), w) {
						t.Fatalf("Run: %q does not name %q", err, w)
					}
				}
				t.Logf("refused to start: %v", err)
			case <-time.After(20 * time.Second):
				t.Fatal("the misconfigured replica started")
			}
			s.replicas[3] = nil

			// One that finds it only while following (the start check
			// skipped, as on a log that records the settings only after it
			// started): not ready, and it never stands.
			s.startEdited(t, 3, misconfigure, coordinator.SkipStartCheck)
			bad := s.harness(3)
			unfit := awaitUnfit(t, bad, want)
			t.Logf("the misconfigured replica: 503 %q", unfit)
			if got := replicaMetric(t, bad, "capgate_coordinator_replica_unfit"); got != 1 {
				t.Fatalf("capgate_coordinator_replica_unfit = %v, want 1", got)
			}

			s.stop(t, first)
			next := s.awaitLeader(t)
			if next == 3 {
				t.Fatal("the misconfigured replica took over")
			}
			h2 := s.harness(next)
			m.h = h2
			if _, err := m.tryHeartbeat(0); err != nil {
				t.Fatalf("heartbeat at the new leader with the member token: %v", err)
			}
			h2.join(t, "g", creds, api.JoinRequest{ClientID: "b", Topics: []string{"orders"}}) // minted before: same issuer
			h2.clientCredential(t, []string{"g"}, []string{"orders"})
			if got := replicaMetric(t, bad, "capgate_coordinator_replica_takeover_attempts_total"); got != 0 {
				t.Fatalf("the misconfigured replica attempted %v takeovers", got)
			}
			if status, body, _ := bad.do(t, "GET", "/readyz", "", nil); status != http.StatusServiceUnavailable ||
				!strings.Contains(string(body), "unfit") {
				t.Fatalf("misconfigured /readyz after the failover: %d %s", status, body)
			}
		})
	}
}

// firstToStand returns a replica id whose stagger (coordinator
// electorConfig: FNV-64a of the id, modulo 6 slots) is below every one
// of others': of all the followers, it notices a silent log first.
func firstToStand(t *testing.T, others ...string) string {
	t.Helper()
	slot := func(id string) uint64 {
		h := fnv.New64a()
		h.Write([]byte(id))
		return h.Sum64() % 6
	}
	lowest := uint64(6)
	for _, o := range others {
		lowest = min(lowest, slot(o))
	}
	for i := range 100 {
		if id := fmt.Sprintf("misconfigured-%d", i); slot(id) < lowest {
			return id
		}
	}
	t.Fatalf("no id staggers before %v", others)
	return ""
}

// awaitUnfit polls h's /readyz (deadline 10 s) until it answers 503
// unavailable with an "unfit:" message holding every one of want, and
// returns the message.
func awaitUnfit(t *testing.T, h *harness, want []string) string {
	t.Helper()
	var msg string
	eventually(t, func() string {
		status, body, _ := h.do(t, "GET", "/readyz", "", nil)
		var eb struct {
			Error struct {
				Code    api.Code `json:"code"`
				Message string   `json:"message"`
			} `json:"error"`
		}
		json.Unmarshal(body, &eb)
		msg = eb.Error.Message
		if status != http.StatusServiceUnavailable || eb.Error.Code != api.CodeUnavailable || !strings.HasPrefix(msg, "unfit:") {
			return fmt.Sprintf("/readyz %d %s", status, body)
		}
		for _, w := range want {
			if !strings.Contains(msg, w) {
				return fmt.Sprintf("/readyz message %q lacks %q", msg, w)
			}
		}
		return ""
	})
	return msg
}

// replicaMetric reads one unlabelled metric from h's /metrics.
func replicaMetric(t *testing.T, h *harness, name string) float64 {
	t.Helper()
	status, body, _ := h.do(t, "GET", "/metrics", "", nil)
	v, ok := metricValue(body, name)
	if status != http.StatusOK || !ok {
		t.Fatalf("/metrics: %d, no %s", status, name)
	}
	return v
}
