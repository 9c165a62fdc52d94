package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/capgate/capgate/internal/coordinators/coordinatorstest"
	"github.com/capgate/capgate/internal/stack"
)

// TestProduceWithAClientCredential: `capgate produce` writes with a
// client credential whose ops include produce (--credential,
// --credential-file or CAPGATE_CREDENTIAL) against a real `capgate dev`,
// with no admin token anywhere (newuser3 #3: produce took only a
// capability or the admin token, and the gateway refused a credential
// "join a group with it"). A consume-only credential is refused 403
// saying so. Without --partition the gateway places the records (its
// topic route): keyed lines (--key-separator) are read back on the
// partition Kafka's default partitioner (franz-go's murmur2, over demo's
// 12 partitions) gives their key, and -o json says where they went.
func TestProduceWithAClientCredential(t *testing.T) {
	t.Parallel()
	d := startDev(t, t.TempDir())
	var writer, reader struct {
		Credential string `json:"client_credential"`
	}
	d.adminJSON(t, &writer, "client-credential", "--name", "writer", "--groups", "*", "--topics", "demo", "--ops", "consume,produce")
	d.adminJSON(t, &reader, "client-credential", "--name", "reader", "--groups", "*", "--topics", "demo")
	endpoints := []string{"--coordinator", d.coordinator, "--gateways", d.gateway}
	produce := func(stdin string, env []string, args ...string) (string, string, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, capgate, append(append([]string{"produce", "--topic", "demo"}, args...), endpoints...)...)
		cmd.Stdin, cmd.Env = strings.NewReader(stdin), append(stack.CleanEnv(), env...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}

	_, stderr, err := produce("a\nb\n", nil, "--credential", writer.Credential, "--partition", "1")
	if err != nil || !strings.Contains(stderr, "produced 2 records to demo/1") {
		t.Fatalf("produce --credential: %v\n%s", err, stderr)
	}
	file := filepath.Join(t.TempDir(), "writer.cred")
	writeFile(t, file, writer.Credential+"\n")
	if _, stderr, err = produce("c\n", nil, "--credential-file", file, "--partition", "2"); err != nil || !strings.Contains(stderr, "produced 1 record to demo/2") {
		t.Fatalf("produce --credential-file: %v\n%s", err, stderr)
	}
	if _, stderr, err = produce("d\n", []string{"CAPGATE_CREDENTIAL=" + writer.Credential}, "--partition", "2"); err != nil || !strings.Contains(stderr, "produced 1 record to demo/2") {
		t.Fatalf("produce with CAPGATE_CREDENTIAL: %v\n%s", err, stderr)
	}

	_, stderr, err = produce("x\n", nil, "--credential", reader.Credential, "--partition", "1")
	if err == nil || !strings.Contains(stderr, "forbidden (403)") || !strings.Contains(stderr, "does not allow produce") {
		t.Errorf("produce with a consume-only credential: %v\n%s", err, stderr)
	}
	// A topic the credential does not name said so and not what would
	// write there, as the consume-only refusal does (newuser10).
	for _, args := range [][]string{{"--topic", "orders"}, {"--topic", "orders", "--partition", "0"}} {
		_, stderr, err = produce("x\n", nil, append([]string{"--credential", writer.Credential}, args...)...)
		if want := `does not name topic "orders" (its topics: [demo]): mint one with --ops consume,produce --topics orders (capgate admin client-credential)`; err == nil || !strings.Contains(stderr, want) {
			t.Errorf("produce %v with a credential for demo: %v\n%s, want %q", args, err, stderr, want)
		}
	}

	// No --partition: the gateway places each line.
	kafka := kgo.StickyKeyPartitioner(nil).ForTopic("demo")
	var lines strings.Builder
	want := map[string]int32{}
	for i := range 12 {
		key := fmt.Sprintf("customer-%d", i)
		fmt.Fprintf(&lines, "%s:v-%s\n", key, key)
		want["v-"+key] = int32(kafka.Partition(&kgo.Record{Key: []byte(key)}, 12))
	}
	stdout, stderr, err := produce(lines.String(), nil, "--credential", writer.Credential, "--key-separator", ":", "-o", "json")
	var summary struct {
		Records    int `json:"records"`
		Partitions []struct {
			Partition int32 `json:"partition"`
			Count     int   `json:"count"`
		} `json:"partitions"`
	}
	if err != nil || json.Unmarshal([]byte(stdout), &summary) != nil || summary.Records != 12 {
		t.Fatalf("produce --credential without --partition: %v\n%s\n%s", err, stdout, stderr)
	}
	perPartition := map[int32]int{}
	for _, p := range want {
		perPartition[p]++
	}
	for _, p := range summary.Partitions {
		if perPartition[p.Partition] != p.Count {
			t.Errorf("-o json says %d records on demo/%d, Kafka puts %d there: %s", p.Count, p.Partition, perPartition[p.Partition], stdout)
		}
	}

	out := run(t, 60*time.Second, "", d.consumeArgs("check", "--max-records", "16", "--idle-exit", "20s")...)
	records := parseConsumed(t, out)
	var got []string
	for _, r := range records {
		if r.Value == nil {
			continue
		}
		got = append(got, *r.Value)
		if part, keyed := want[*r.Value]; keyed && r.Partition != part {
			t.Errorf("%s read on demo/%d; Kafka puts its key on demo/%d", *r.Value, r.Partition, part)
		}
	}
	slices.Sort(got)
	if len(got) != 16 || strings.Join(got[:4], ",") != "a,b,c,d" {
		t.Fatalf("consumed %q, want a, b, c, d and the 12 keyed lines (and nothing of the refused produces)", got)
	}
}

// producedSummary is `capgate produce -o json`'s object.
type producedSummary struct {
	Records    int `json:"records"`
	Partitions []struct {
		Partition int32 `json:"partition"`
		Count     int   `json:"count"`
	} `json:"partitions"`
}

// TestProduceKeylessLinesAreSticky: keyless lines that arrive together
// are one write to one partition, as Kafka's producers do (the sticky
// partitioner, KIP-480) — `capgate produce` without --partition sent
// them round-robin, a write per partition for each batch (24 lines piped
// in: 12 writes of 2), and the gateway's topic route (a credential's
// produce) did the same. The next batch goes to the next partition.
func TestProduceKeylessLinesAreSticky(t *testing.T) {
	t.Parallel()
	d := startDev(t, t.TempDir())
	credFile := d.demoWriterFile(t)

	// 24 short lines are one write into the pipe (under PIPE_BUF: atomic),
	// so one read of stdin and one batch.
	lines := strings.Repeat("line\n", 24)
	produce := func(args ...string) producedSummary {
		t.Helper()
		var s producedSummary
		out := run(t, 60*time.Second, lines, append(args, "-o", "json")...)
		if err := json.Unmarshal([]byte(out), &s); err != nil || s.Records != 24 {
			t.Fatalf("capgate %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return s
	}
	for name, args := range map[string][]string{
		"admin token": d.produceArgs(),
		"credential":  {"produce", "-t", "demo", "--credential-file", credFile, "--gateways", d.gateway},
	} {
		if s := produce(args...); len(s.Partitions) != 1 {
			t.Errorf("%s: 24 keyless lines piped at once were written to %d partitions (%+v); want one write to one partition", name, len(s.Partitions), s.Partitions)
		}
	}

	// Two batches (--batch-records 12): two partitions, one after the other.
	s := produce(d.produceArgs("--batch-records", "12")...)
	if len(s.Partitions) != 2 || s.Partitions[0].Count != 12 || s.Partitions[1].Count != 12 ||
		(s.Partitions[1].Partition-s.Partitions[0].Partition != 1 && s.Partitions[1].Partition-s.Partitions[0].Partition != 11) {
		t.Errorf("24 keyless lines in batches of 12 went to %+v; want 12 on one partition and 12 on the next", s.Partitions)
	}
}

// TestProduceTypedLinesThenEndOfInput: a line typed, sent, then Ctrl-D —
// stdin's end arriving alone — exits 0 with the line's summary. With a
// credential and no --partition the empty batch the end made was sent to
// the topic route and refused 400 ("records must hold at least one
// record"): exit 1 after the line was written, every interactive run.
func TestProduceTypedLinesThenEndOfInput(t *testing.T) {
	t.Parallel()
	d := startDev(t, t.TempDir())
	credFile := d.demoWriterFile(t)

	for name, args := range map[string][]string{
		"credential":  {"produce", "-t", "demo", "--credential-file", credFile, "--gateways", d.gateway},
		"admin token": d.produceArgs(),
	} {
		before := d.demoRecords(t)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		cmd := exec.CommandContext(ctx, capgate, args...)
		cmd.Env = stack.CleanEnv()
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		stdin.Write([]byte("typed\n"))
		eventually(t, 30*time.Second, name+": the typed line written", func() (bool, string) {
			n := d.demoRecords(t)
			return n == before+1, ""
		})
		stdin.Close() // Ctrl-D
		err = cmd.Wait()
		cancel()
		if err != nil || !strings.Contains(stderr.String(), "produced 1 record to demo/") {
			t.Errorf("%s: a typed line then the end of input: %v\n%s; want exit 0 and the line's summary", name, err, stderr.String())
		}
	}
}

// demoRecords is the number of records in topic demo (the sum of its
// partitions' log ends; nothing is deleted in capgate dev).
func (d *devProcess) demoRecords(t *testing.T) int64 {
	t.Helper()
	var topic struct {
		Partitions []struct {
			Latest int64 `json:"latest_offset"`
		} `json:"partitions"`
	}
	d.adminJSON(t, &topic, "topic", "demo")
	var n int64
	for _, p := range topic.Partitions {
		n += p.Latest
	}
	return n
}

// demoWriterFile mints a client credential that may produce to demo and
// returns the file holding it.
func (d *devProcess) demoWriterFile(t *testing.T) string {
	t.Helper()
	var writer struct {
		Credential string `json:"client_credential"`
	}
	d.adminJSON(t, &writer, "client-credential", "--name", "writer", "--groups", "*", "--topics", "demo", "--ops", "consume,produce")
	credFile := filepath.Join(t.TempDir(), "writer.cred")
	writeFile(t, credFile, writer.Credential+"\n")
	return credFile
}

// TestProduceToAWrongGatewaySaysWhatToFix: `capgate produce` whose
// --gateways names no gateway says which flag to fix, as consume does:
// nothing listening was "connection refused" and a Kafka port (the
// gateway's Kafka listener) "connection reset by peer", bare. A
// credential passed in that expired says what to pass instead (its own
// stack: the records it writes while the credential lives would be in
// other tests' way).
func TestProduceToAWrongGatewaySaysWhatToFix(t *testing.T) {
	t.Parallel()
	d := startDev(t, t.TempDir())
	m := regexp.MustCompile(`(?m)^\s+kafka listener:\s+(\S+)`).FindStringSubmatch(d.stdout.String())
	if m == nil {
		t.Fatalf("no kafka listener in capgate dev's banner:\n%s", d.stdout.String())
	}
	closed := closedPort(t)
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"produce", "-t", "demo", "-p", "0", "--token-file", filepath.Join(d.dataDir, "credentials.json"), "--coordinator", d.coordinator, "--gateways", "http://" + closed},
			"nothing listens at " + closed + ": is a gateway running (capgate dev, or capgate gateway)? Point --gateways or CAPGATE_GATEWAY_URLS at it"},
		{[]string{"produce", "-t", "demo", "--credential-file", d.demoWriterFile(t), "--gateways", "http://" + m[1]},
			"is it a Kafka port (a broker, a gateway's Kafka listener) rather than a gateway's HTTP address? Point --gateways or CAPGATE_GATEWAY_URLS at a gateway"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		cmd := exec.CommandContext(ctx, capgate, c.args...)
		cmd.Stdin, cmd.Env = strings.NewReader("x\n"), stack.CleanEnv()
		out, err := cmd.CombinedOutput()
		cancel()
		if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 1 || !strings.Contains(string(out), c.says) {
			t.Errorf("capgate %s: %v\n%s\nwant exit 1 saying %q", strings.Join(c.args, " "), err, out, c.says)
		}
	}
	// An expired credential: the gateway's "token expired: exp …, 4m13s
	// ago" and no more (newuser14). It says what to pass instead, exit 1.
	t.Run("expired_credential", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "writer.json")
		writeFile(t, file, d.adminCLI(t, "client-credential", "--name", "writer", "--groups", "g1", "--topics", "demo", "--ops", "consume,produce", "--ttl", "1s"))
		want := "token_expired (401)"
		hint := "the client credential expired; pass a fresh one (capgate admin client-credential --ops consume,produce --topics demo mints one, --ttl its lifetime)"
		var stderr string
		for deadline := time.Now().Add(time.Minute); !strings.Contains(stderr, want) && time.Now().Before(deadline); { // past its exp and the gateway's leeway
			cmd := exec.Command(capgate, "produce", "--topic", "demo", "--credential-file", file, "--gateways", d.gateway)
			var errOut strings.Builder
			cmd.Stdin, cmd.Stderr, cmd.Env = strings.NewReader("x\n"), &errOut, stack.CleanEnv()
			err := cmd.Run()
			stderr = errOut.String()
			var exit *exec.ExitError
			if strings.Contains(stderr, want) && (!errors.As(err, &exit) || exit.ExitCode() != 1) {
				t.Fatalf("produce with an expired credential: %v, want exit 1", err)
			}
		}
		if !strings.Contains(stderr, want) || !strings.Contains(stderr, hint) {
			t.Errorf("produce with an expired credential, stderr:\n%s\nwant %q … %q", stderr, want, hint)
		}
	})
}

// closedPort is a loopback host:port nothing listens at, for the test's
// life (coordinatorstest.Down: a socket bound, never listening — a port
// listened at and closed was free for the next listener of the parallel
// tests: CI saw another process's Kafka listener there, "connection reset
// by peer").
func closedPort(t *testing.T) string {
	t.Helper()
	return strings.TrimPrefix(coordinatorstest.Down(t), "http://")
}
