package kafkaclients

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// kcat runs Debian's kcat (librdkafka) against the first gateway's Kafka
// listener with SASL PLAIN, the token as password (from a 0600 config
// file, so it is not on the command line), and returns its output.
func kcat(t testing.TB, s *Stack, token string, stdin string, args ...string) (string, error) {
	t.Helper()
	bin, all := kcatArgs(t, s, token, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, all...)
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// kcatArgs is the kcat binary and its arguments for kcat's args against
// the first gateway's Kafka listener, the token in a 0600 config file.
func kcatArgs(t testing.TB, s *Stack, token string, args ...string) (string, []string) {
	t.Helper()
	bin, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatalf("kcat not installed (.ci/run installs it): %v", err)
	}
	conf := filepath.Join(t.TempDir(), "kcat.conf")
	body := "security.protocol=SASL_PLAINTEXT\nsasl.mechanisms=PLAIN\nsasl.username=capgate\nsasl.password=" + token + "\n"
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return bin, append([]string{"-b", s.KafkaAddrs()[0], "-F", conf}, args...)
}

// TestKcatWithCapability: kcat with SASL PLAIN and a partition capability
// lists the metadata (-L: the gateways as brokers), produces to its
// partition (-P) and consumes it back (-C -p N); a partition the
// capability does not cover is refused.
func TestKcatWithCapability(t *testing.T) {
	s := Start(t, Options{Partitions: 6})
	grant := s.Grant(t, "orders", 4, []string{"fetch", "produce"}, time.Minute)

	out, err := kcat(t, s, grant.Capability, "", "-L", "-t", "orders")
	if err != nil {
		t.Fatalf("kcat -L: %v\n%s", err, out)
	}
	if !strings.Contains(out, `topic "orders" with 6 partitions`) || !strings.Contains(out, s.KafkaAddrs()[0]) {
		t.Fatalf("kcat -L does not show the topic and the gateway as broker:\n%s", out)
	}

	if out, err := kcat(t, s, grant.Capability, "one\ntwo\nthree\n", "-P", "-t", "orders", "-p", "4"); err != nil {
		t.Fatalf("kcat -P: %v\n%s", err, out)
	}
	out, err = kcat(t, s, grant.Capability, "", "-C", "-t", "orders", "-p", "4", "-o", "beginning", "-e", "-f", "%p/%o=%s\\n")
	if err != nil {
		t.Fatalf("kcat -C: %v\n%s", err, out)
	}
	if want := "4/0=one\n4/1=two\n4/2=three\n"; !strings.Contains(out, want) {
		t.Fatalf("kcat -C -p 4 = %q, want %q", out, want)
	}

	out, err = kcat(t, s, grant.Capability, "", "-C", "-t", "orders", "-p", "5", "-o", "beginning", "-e")
	t.Logf("kcat -C -p 5 (capability for 4): %v\n%s", err, out)
	if err == nil || !strings.Contains(out, "uthorization") {
		t.Fatalf("kcat -C -p 5 with a capability for 4: err %v, want an authorization failure:\n%s", err, out)
	}
	// An absolute offset skips ListOffsets: the Fetch itself is refused.
	out, err = kcat(t, s, grant.Capability, "", "-C", "-t", "orders", "-p", "5", "-o", "0", "-e")
	t.Logf("kcat -C -p 5 -o 0 (capability for 4): %v\n%s", err, out)
	if err == nil || !strings.Contains(out, "uthorization") {
		t.Fatalf("kcat -C -p 5 -o 0 with a capability for 4: err %v, want an authorization failure:\n%s", err, out)
	}
	if out, err := kcat(t, s, grant.Capability, "x\n", "-P", "-t", "orders", "-p", "5"); err == nil {
		t.Fatalf("kcat -P -p 5 with a capability for 4 succeeded:\n%s", out)
	}
}

// TestKcatGroupThroughLanes: kcat's balanced consumer (librdkafka's
// classic group protocol) with a client credential over SASL PLAIN reads
// every partition of a topic through the gateway's fetch lanes. Lanes
// have ports of their own because librdkafka takes brokers at one
// address for one broker whose node id keeps changing: with the four
// lanes at one port this consumer never fetched three of its four
// partitions.
func TestKcatGroupThroughLanes(t *testing.T) {
	s := Start(t, Options{Partitions: 4})
	for p := range int32(4) {
		produceDirect(t, s, "orders", p, 3)
	}
	out, err := kcat(t, s, s.ClientCredential(t, "kcat-group"), "", "-G", "kcat-group", "-X", "auto.offset.reset=earliest",
		"-e", "-f", "%p/%o\\n", "orders")
	if err != nil {
		t.Fatalf("kcat -G: %v\n%s", err, out)
	}
	for p := range 4 {
		for o := range 3 {
			if want := fmt.Sprintf("%d/%d\n", p, o); !strings.Contains(out, want) {
				t.Fatalf("kcat -G read no %q:\n%s", want, out)
			}
		}
	}
}
