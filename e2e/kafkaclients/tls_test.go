package kafkaclients

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/capgate/capgate/e2e/sdk"
	"github.com/capgate/capgate/internal/stack"
)

// TestKafkaListenerTLS: with TLS on the gateway (capgate dev --tls), the
// Kafka listener serves the gateway's certificate on every fetch lane:
// kcat over SASL_SSL, trusting the dev CA, lists the metadata with the
// client credential and its group consumer reads to the end of every
// partition; over plaintext it gets nowhere.
func TestKafkaListenerTLS(t *testing.T) {
	work := t.TempDir()
	_, devLog := startDevProcess(t, work, "--tls")
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
	// The gateway says why (it was a debug line).
	sdk.Eventually(t, 20*time.Second, "the plaintext client logged", func() (bool, string) {
		return strings.Contains(devLog(), "a plaintext client on the TLS Kafka listener"), "not in the dev's log"
	})
}

// TestTLSClientOnPlaintextListenerIsLogged: a kgo client speaking TLS (and an HTTP request)
// (security.protocol SASL_SSL) to the plaintext listener is closed, and
// the gateway logs what the client should set — it logged nothing above
// debug while the client retried (TestKafkaListenerTLS checks the other
// way round).
func TestTLSClientOnPlaintextListenerIsLogged(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	s := Start(t, Options{Partitions: 1, Observe: core})
	cl := kgoClient(t, s.KafkaAddrs(), s.ClientCredential(t, "g"), false,
		kgo.DialTLSConfig(&tls.Config{InsecureSkipVerify: true}), kgo.RequestRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := cl.Ping(ctx); err == nil {
		t.Fatal("a TLS client reached the plaintext listener")
	}
	logged := func(what, reason string) {
		sdk.Eventually(t, 20*time.Second, what+" logged", func() (bool, string) {
			return logs.FilterMessageSnippet("kafka connection refused").FilterField(zap.String("reason", reason)).Len() > 0,
				fmt.Sprintf("%d warnings", logs.Len())
		})
	}
	logged("the TLS client", "a TLS client on the plaintext Kafka listener (security.protocol SSL or SASL_SSL): "+
		"the client should use SASL_PLAINTEXT, or serve TLS on the gateway (gateway.tls)")

	// An HTTP URL pointed at the Kafka port (capgate consume --gateways,
	// curl) likewise.
	if resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + s.KafkaAddrs()[0] + "/readyz"); err == nil {
		resp.Body.Close()
		t.Fatalf("HTTP to the Kafka listener answered %s", resp.Status)
	}
	logged("the HTTP request", "an HTTP request on the Kafka listener: HTTP clients (capgate consume and produce, the SDK, curl) "+
		"use the gateway's HTTP address (gateway.listen); this port is for Kafka clients")
}
