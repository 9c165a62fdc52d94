package kafkaclients

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/e2e/sdk"
)

var npmOnce sync.Once

// kafkajsDir is testdata/kafkajs with its pinned node_modules: .ci/run
// installs them (npm ci); a checkout without them installs them here.
func kafkajsDir(t testing.TB) string {
	t.Helper()
	dir, err := filepath.Abs("testdata/kafkajs")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node not installed (.ci/run installs nodejs and npm): %v", err)
	}
	npmOnce.Do(func() {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", "kafkajs")); err == nil {
			return
		}
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Logf("npm ci: %v\n%s", err, out)
		}
	})
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "kafkajs")); err != nil {
		t.Fatalf("kafkajs not installed in %s (run npm ci there): %v", dir, err)
	}
	return dir
}

// startKafkaJS runs testdata/kafkajs/consumer.js as one group member.
func startKafkaJS(t testing.TB, s *Stack, name, group, token string) *consumerProc {
	t.Helper()
	dir := kafkajsDir(t)
	cmd := exec.Command("node", "consumer.js")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "BROKERS="+strings.Join(s.KafkaAddrs(), ","), "CAPGATE_TOKEN="+token,
		"GROUP="+group, "TOPIC="+s.Topic, "CLIENT_ID="+name)
	return runProc(t, cmd)
}

// polled is, per partition and offset, who polled it among the procs.
func polled(procs map[string]*consumerProc) map[int32]map[int64][]string {
	out := map[int32]map[int64][]string{}
	for name, p := range procs {
		for _, e := range p.Events() {
			if e.Ev != "record" {
				continue
			}
			if out[e.Partition] == nil {
				out[e.Partition] = map[int64][]string{}
			}
			out[e.Partition][e.Offset] = append(out[e.Partition][e.Offset], name)
		}
	}
	return out
}

// allRead waits until procs together read want[p] records (offsets
// 0..want[p]-1, once or more) of each partition p.
func allRead(t testing.TB, within time.Duration, procs map[string]*consumerProc, want map[int32]int64) {
	t.Helper()
	sdk.Eventually(t, within, "every record read", func() (bool, string) {
		got := polled(procs)
		for p, n := range want {
			if int64(len(got[p])) < n {
				return false, fmt.Sprintf("partition %d: %d of %d", p, len(got[p]), n)
			}
		}
		return true, ""
	})
}

func countPolled(m map[int32]map[int64][]string) int {
	n := 0
	for _, offs := range m {
		n += len(offs)
	}
	return n
}

// TestKafkaJSGroup: unmodified KafkaJS consumers (classic eager protocol,
// SASL OAUTHBEARER through its provider hook) form a group through the
// listener; capgate assigns, a third member joins (KafkaJS revokes
// everything and rejoins, as eager members do), and every record is
// consumed.
func TestKafkaJSGroup(t *testing.T) {
	s := Start(t, Options{Partitions: 6})
	cred := s.ClientCredential(t, "js")
	for p := range int32(6) {
		produceDirect(t, s, "orders", p, 5)
	}
	procs := map[string]*consumerProc{}
	for _, name := range []string{"js1", "js2"} {
		procs[name] = startKafkaJS(t, s, name, "js", cred)
	}
	sdk.Eventually(t, 60*time.Second, "2 KafkaJS members consumed all 30", func() (bool, string) {
		ok, why := settled(t, s, "js", 2)
		n := countPolled(polled(procs))
		return ok && n == 30, fmt.Sprintf("%s; %d of 30 polled", why, n)
	})
	procs["js3"] = startKafkaJS(t, s, "js3", "js", cred)
	sdk.Eventually(t, 60*time.Second, "3 members settled", func() (bool, string) { return settled(t, s, "js", 3) })
	for p := range int32(6) {
		produceDirect(t, s, "orders", p, 5)
	}
	sdk.Eventually(t, 60*time.Second, "all 60 records consumed, js3 among the consumers", func() (bool, string) {
		got := polled(procs)
		js3 := 0
		for _, e := range procs["js3"].Events() {
			if e.Ev == "record" {
				js3++
			}
		}
		return countPolled(got) == 60 && js3 > 0, fmt.Sprintf("%d of 60 polled, js3 %d", countPolled(got), js3)
	})
	dups := 0
	for _, offs := range polled(procs) {
		for _, who := range offs {
			if len(who) > 1 {
				dups++
			}
		}
	}
	for name, p := range procs {
		for _, e := range p.Events() {
			if e.Ev == "crash" {
				t.Errorf("%s crashed: %s", name, e.Err)
			}
		}
	}
	t.Logf("KafkaJS: 60 records, %d consumed twice (eager rebalance, uncommitted window)", dups)
}
