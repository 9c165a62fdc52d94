package ha

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/harness"
	"github.com/capgate/capgate/internal/stack"
	"github.com/capgate/capgate/store"
)

// TestMisconfiguredReplicaRefusesToStart (redteam2 K, K′, real
// processes): beside three replicas under a steady stream, a fourth
// `capgate coordinator` with the wrong kafka_state KEK — then one with
// another coordinator.id — exits at start with an error naming both
// values (KEK fingerprints, ids; never key material) instead of standing
// by looking ready. Then the leader is killed: a good replica takes
// over, fetches keep flowing and none is answered 503. Before the fix
// both started as ready standbys (/readyz 200), and the first stood in
// the failover: the wrong KEK fenced and failed forever while no good
// replica took over; the other id took over and refused every
// credential.
func TestMisconfiguredReplicaRefusesToStart(t *testing.T) {
	t.Parallel()
	const group = "ha-misconfigured"
	c := startHA(t, group, nil)
	prod := c.StartProducer(t, produceEvery)
	c.StartMember(t, harness.MemberOptions{Name: "a", Group: group})
	c.WaitSettled(t, group, 1)
	c.WaitFlowing(t, group, 100)

	good := c.Replicas[0].Config()
	goodKEK, err := store.LoadKEKFile(good.KafkaState.KEKFile)
	if err != nil {
		t.Fatal(err)
	}
	otherKEK := filepath.Join(t.TempDir(), "other.kek")
	if err := os.WriteFile(otherKEK, []byte(store.GenerateKEK()), 0o600); err != nil {
		t.Fatal(err)
	}
	badKEK, err := store.LoadKEKFile(otherKEK)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(*coordinator.Config)
		want []string
	}{
		{"wrong-kek", func(cfg *coordinator.Config) { cfg.KafkaState.KEKFile = otherKEK }, []string{goodKEK.ID(), badKEK.ID()}},
		{"other-id", func(cfg *coordinator.Config) { cfg.ID = good.ID + "-typo" }, []string{`issuer: the log's "` + good.ID + `", ours "` + good.ID + `-typo"`}},
	} {
		cfg := good
		// Port 0, the process's own pick: it refuses to start, so nobody
		// needs its address. A port found free, closed and handed over
		// could be taken by a test beside it first, and the replica would
		// fail to listen rather than refuse the log.
		cfg.Listen, cfg.Replica.ID, cfg.Replica.Advertise, cfg.DataDir = "127.0.0.1:0", tc.name, "", t.TempDir()
		tc.edit(&cfg)
		proc, err := stack.Launch{Name: tc.name, Bin: binaries.Capgate, Dir: t.TempDir(), Section: "coordinator", Settings: &cfg}.Start()
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-proc.Done():
		case <-time.After(30 * time.Second): // a deadline, not a wait: it exits or fails the test
			proc.Kill()
			t.Fatalf("%s: still running (it should refuse to start)\n%s", tc.name, proc.Tail())
		}
		tail, exit := proc.Tail(), proc.Wait(time.Second) // exited: returns at once
		if exit == nil || !strings.Contains(tail, "cannot take this log over") {
			t.Fatalf("%s: exited %v, want an error naming the mismatch:\n%s", tc.name, exit, tail)
		}
		for _, w := range tc.want {
			if !strings.Contains(tail, w) {
				t.Fatalf("%s: the refusal does not name %q:\n%s", tc.name, w, tail)
			}
		}
		t.Logf("%s refused to start: %v", tc.name, exit)
	}

	old := leaderAmong(t, c)
	since := harness.Now()
	old.Kill(t)
	next := leaderAmong(t, c, old)
	t.Logf("%s killed, %s took over", old.Name, next.Name)
	c.WaitFlowing(t, group, 200)
	s := c.Finish(t, prod, group)
	no503(t, s, since)
}
