package kafkaclients

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/internal/stack"
)

// TestKafkaListenerTLS: with TLS on the gateway (capgate dev --tls), the
// Kafka listener serves the gateway's certificate on every fetch lane:
// kcat over SASL_SSL, trusting the dev CA, lists the metadata with the
// client credential and its group consumer reads to the end of every
// partition; over plaintext it gets nowhere.
func TestKafkaListenerTLS(t *testing.T) {
	work := t.TempDir()
	startDevProcess(t, work, "--tls")
	env := map[string]string{}
	b, err := os.ReadFile(filepath.Join(work, "capgate-data", "credentials.env"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "="); ok {
			env[k] = v
		}
	}
	run := func(protocol string, args ...string) (string, error) {
		conf := filepath.Join(work, protocol+".conf")
		body := "security.protocol=" + protocol + "\nsasl.mechanisms=PLAIN\nsasl.username=capgate\nsasl.password=" + env["CAPGATE_CREDENTIAL"] +
			"\nssl.ca.location=" + env["CAPGATE_CACERT"] + "\n"
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "kcat", append([]string{"-F", conf, "-b", env["CAPGATE_KAFKA_BOOTSTRAP"]}, args...)...)
		cmd.Env = stack.CleanEnv()
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("SASL_SSL", "-L", "-t", "demo", "-m", "5")
	if err != nil || !strings.Contains(out, `topic "demo" with 12 partitions`) {
		t.Fatalf("kcat over SASL_SSL: %v\n%s", err, out)
	}
	// A group consumer reaches the end of all 12 partitions: each fetch
	// lane (a port of its own) serves TLS too.
	out, err = run("SASL_SSL", "-G", "tls-lanes", "-X", "auto.offset.reset=earliest", "-e", "demo")
	if err != nil || strings.Count(out, "Reached end of topic demo") != 12 {
		t.Fatalf("kcat -G over SASL_SSL: %v, want the end of all 12 partitions:\n%s", err, out)
	}
	if out, err := run("SASL_PLAINTEXT", "-L", "-t", "demo", "-m", "5"); err == nil {
		t.Fatalf("kcat over plaintext to the TLS listener succeeded:\n%s", out)
	}
}
