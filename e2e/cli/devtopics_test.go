package cli_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/coordinator"
)

// TestDevCreatesTheTopicsItIsGiven: capgate dev had one topic, demo, and
// no way to another — kcat -P to a missing topic waited and dropped its
// line (the embedded Kafka creates no topic on use), and `capgate
// produce -t orders` was 404 "Kafka has no such topic" (newuser10).
// --topic NAME[:PARTITIONS] creates them, the banner names them, and
// they are written and read as demo is.
func TestDevCreatesTheTopicsItIsGiven(t *testing.T) {
	t.Parallel()
	d := startDev(t, t.TempDir(), "--topic", "orders:3", "--topic", "audit")
	if banner := d.stdout.String(); !strings.Contains(banner, `(embedded; topics "demo" 12 partitions, "audit" 12, "orders" 3)`) {
		t.Errorf("the banner does not name the topics:\n%s", banner)
	}
	var topics coordinator.TopicsResponse
	d.adminJSON(t, &topics, "topics")
	got := map[string]int32{}
	for _, tp := range topics.Topics {
		got[tp.Topic] = tp.Partitions
	}
	if got["orders"] != 3 || got["audit"] != 12 || got["demo"] != 12 || len(got) != 3 {
		t.Fatalf("admin topics: %v, want demo 12, audit 12, orders 3", got)
	}
	if out := run(t, 30*time.Second, "one\ntwo\n", append(d.produceArgs("-p", "2"), "--topic", "orders", "-o", "json")...); !strings.Contains(out, `"partition":2`) {
		t.Errorf("produce to orders/2: %s", out)
	}
	if out := run(t, 30*time.Second, "", "consume", "-g", "topics", "-t", "orders", "-n", "2",
		"--credential-file", filepath.Join(d.dataDir, "credentials.json"), "--coordinator", d.coordinator, "--gateways", d.gateway); out != "orders/2\t0\t\tone\norders/2\t1\t\ttwo\n" {
		t.Errorf("consume orders: %q", out)
	}
	// A topic Kafka does not have ended consume and produce with the
	// server's "no such topic" and not where the topics are listed or
	// how capgate dev gets another.
	const hint = "(capgate admin topics lists the topics Kafka has; capgate dev creates more with --topic NAME[:PARTITIONS])"
	for _, args := range [][]string{
		append(d.produceArgs("-p", "0"), "--topic", "nosuch"),
		{"consume", "-g", "topics", "-t", "nosuch", "--credential-file", filepath.Join(d.dataDir, "credentials.json"), "--coordinator", d.coordinator, "--gateways", d.gateway},
	} {
		if _, stderr := runFailing(t, 30*time.Second, args...); !strings.Contains(stderr, `unknown topic "nosuch": Kafka has no such topic`+"\n"+hint) {
			t.Errorf("capgate %s: %s, want the hint %q", args[0], stderr, hint)
		}
	}
}
