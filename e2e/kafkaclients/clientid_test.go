package kafkaclients

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/sdk"
)

// kafkaClientIDs are client.ids Kafka allows: a space and 300
// characters (no capgate name: the listener passed them on as the join's
// client_id, which the coordinator refused — 400, INVALID_REQUEST to the
// client, which never joined), and 245 characters (a name, but the
// coordinator answered 500 for its member and kept it: one more ghost on
// every JoinGroup retry).
var kafkaClientIDs = map[string]string{
	"space": "my app",
	"long":  strings.Repeat("k", 300),
	"ghost": strings.Repeat("g", 245),
}

// checkMembers requires the group's capgate members to carry client.id
// mapped (capgateClientID) and ids that are names.
func checkMembers(t testing.TB, d coordinator.GroupDescription, kafkaID string, n int) {
	t.Helper()
	want := strings.ReplaceAll(kafkaID, " ", "_")
	want = want[:min(len(want), 255)]
	if len(d.Members) != n {
		t.Fatalf("%d members, want %d: %+v", len(d.Members), n, d.Members)
	}
	for _, m := range d.Members {
		if m.ClientID != want || len(m.ID) > 255 || !strings.HasPrefix(m.ID, want[:min(len(want), 238)]+"-") {
			t.Fatalf("member %q (client_id %q), want client_id %q", m.ID, m.ClientID, want)
		}
	}
}

// TestKcatWithAnyClientID: kcat's balanced consumer (librdkafka, the
// classic protocol) with a client.id capgate could not take as a name
// joins as one member and reads every record; when it stops, its member
// leaves, no ghost behind (one more was left on every JoinGroup retry).
func TestKcatWithAnyClientID(t *testing.T) {
	s := Start(t, Options{Partitions: 4})
	for p := range int32(4) {
		produceDirect(t, s, "orders", p, 2)
	}
	for name, clientID := range kafkaClientIDs {
		t.Run(name, func(t *testing.T) {
			group := "kcat-" + name
			k := startKcat(t, s, s.ClientCredential(t, group), "-X", "client.id="+clientID, "-G", group,
				"-X", "auto.offset.reset=earliest", "-u", "-f", "%p/%o\\n", "orders")
			sdk.Eventually(t, 20*time.Second, "every record read", func() (bool, string) {
				out := k.output()
				for p := range 4 {
					for o := range 2 {
						if want := fmt.Sprintf("%d/%d\n", p, o); !strings.Contains(out, want) {
							return false, fmt.Sprintf("no %q in:\n%s", want, out)
						}
					}
				}
				return true, ""
			})
			checkMembers(t, s.Describe(t, group), clientID, 1)
			k.stop(t)
			sdk.Eventually(t, 20*time.Second, "no member left", func() (bool, string) {
				d := s.Describe(t, group)
				return len(d.Members) == 0, fmt.Sprintf("members %+v", d.Members)
			})
		})
	}
}

// runningKcat is a kcat consumer running until stopped.
type runningKcat struct {
	cmd  *exec.Cmd
	out  string // the file kcat writes its stdout and stderr to
	done chan error
	once sync.Once
}

// startKcat runs kcat (kcatArgs) until stop or the test's end.
func startKcat(t testing.TB, s *Stack, token string, args ...string) *runningKcat {
	t.Helper()
	bin, all := kcatArgs(t, s, token, args...)
	k := &runningKcat{cmd: exec.Command(bin, all...), out: filepath.Join(t.TempDir(), "kcat.out"), done: make(chan error, 1)}
	out, err := os.Create(k.out)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	k.cmd.Stdout, k.cmd.Stderr = out, out
	if err := k.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { k.done <- k.cmd.Wait() }()
	t.Cleanup(func() { k.stop(t) })
	return k
}

// output is what kcat wrote so far.
func (k *runningKcat) output() string {
	b, _ := os.ReadFile(k.out)
	return string(b)
}

// stop asks kcat to stop (SIGTERM: it leaves its group) and waits.
func (k *runningKcat) stop(t testing.TB) {
	k.once.Do(func() {
		_ = k.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-k.done:
		case <-time.After(20 * time.Second):
			_ = k.cmd.Process.Kill()
			<-k.done
			t.Errorf("kcat did not stop on SIGTERM:\n%s", k.output())
		}
	})
}

// TestKgoWithAnyClientID: franz-go members with such a client.id join
// and poll every record, with the KIP-848 protocol (server-side
// balancer) and the classic one.
func TestKgoWithAnyClientID(t *testing.T) {
	s := Start(t, Options{Partitions: 4})
	for p := range int32(4) {
		produceDirect(t, s, "orders", p, 3)
	}
	for _, proto := range []protocol{kip848, cooperativeSticky} {
		for name, clientID := range kafkaClientIDs {
			if len(clientID) > 256 {
				clientID = clientID[:256] // kgo's own bound
			}
			t.Run(proto.String()+"/"+name, func(t *testing.T) {
				group := "kgo-" + proto.String() + "-" + name
				m := joinGroup(t, s, clientID, group, s.ClientCredential(t, group), proto)
				sdk.Eventually(t, 20*time.Second, "every record polled", func() (bool, string) {
					n := len(m.Records())
					return n == 12, fmt.Sprintf("%d of 12 records", n)
				})
				checkMembers(t, s.Describe(t, group), clientID, 1)
			})
		}
	}
}
