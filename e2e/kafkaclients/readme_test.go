package kafkaclients

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/e2e/sdk"
	"github.com/capgate/capgate/internal/stack"
)

const readmeSection = "## Use your existing Kafka client"

// readmeBlocks returns the fenced blocks of README.md's Kafka client
// section, in order, with their language tags.
func readmeBlocks(t testing.TB) (tags, blocks []string) {
	t.Helper()
	root, err := stack.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	start := strings.Index(text, readmeSection+"\n")
	if start < 0 {
		t.Fatalf("README.md has no %q section", readmeSection)
	}
	text = text[start+len(readmeSection):]
	if end := strings.Index(text, "\n## "); end >= 0 {
		text = text[:end]
	}
	var cur []string
	tag := ""
	for _, line := range strings.Split(text, "\n") {
		switch {
		case tag == "" && strings.HasPrefix(line, "```") && len(line) > 3:
			tag, cur = strings.TrimPrefix(line, "```"), nil
		case tag != "" && line == "```":
			tags, blocks = append(tags, tag), append(blocks, strings.Join(cur, "\n")+"\n")
			tag = ""
		case tag != "":
			cur = append(cur, line)
		}
	}
	return tags, blocks
}

// readmeChecks is what each shell block of the section must print.
var readmeChecks = []struct {
	step string
	want []string
}{
	{"kcat", []string{`topic "demo" with 12 partitions`, `demo/3@0 one\n`, `demo/3@1 two\n`, `Topic authorization failed`, `partition 4: refused`}},
	{"kgo", []string{`demo/3@0 one\n`, `demo/3@1 two\n`}},
	{"kafkajs", []string{`demo/3@0 one\n`, `demo/3@1 two\n`}},
}

// TestReadmeKafkaClients runs README.md's "Use your existing Kafka
// client" section as a user would: against a `capgate dev` process, its
// shell blocks in order, the Go block as kgo-readme/main.go (a module of
// its own requiring franz-go), the JavaScript block as readme.js (with
// the pinned KafkaJS) — and checks what each prints.
func TestReadmeKafkaClients(t *testing.T) {
	tags, blocks := readmeBlocks(t)
	var shells []string
	code := map[string]string{}
	for i, tag := range tags {
		switch tag {
		case "shell":
			shells = append(shells, blocks[i])
		case "go", "js":
			code[tag] = blocks[i]
		default:
			t.Fatalf("unexpected ```%s block in the section", tag)
		}
	}
	if len(shells) != len(readmeChecks) || code["go"] == "" || code["js"] == "" {
		t.Fatalf("the section has %d shell blocks (want %d), go %v, js %v: update readmeChecks", len(shells), len(readmeChecks), code["go"] != "", code["js"] != "")
	}
	work := t.TempDir()
	bin, _ := startDevProcess(t, work)
	writeReadmeKgo(t, filepath.Join(work, "kgo-readme"), code["go"])
	if err := os.WriteFile(filepath.Join(work, "readme.js"), []byte(code["js"]), 0o644); err != nil {
		t.Fatal(err)
	}

	var script strings.Builder
	for i, b := range shells {
		fmt.Fprintf(&script, "echo '@@step %d'\n%s\n", i, b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-ec", "exec 2>&1\n"+script.String())
	cmd.Dir = work
	cmd.Env = stack.CleanEnv("PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"NODE_PATH="+filepath.Join(kafkajsDir(t), "node_modules"), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("README script: %v\n%s", err, out)
	}
	steps := regexp.MustCompile(`(?m)^@@step \d+\n`).Split(string(out), -1)[1:]
	if len(steps) != len(shells) {
		t.Fatalf("the script printed %d steps, want %d:\n%s", len(steps), len(shells), out)
	}
	t.Logf("README script output:\n%s", out)
	for i, check := range readmeChecks {
		for _, want := range check.want {
			if !regexp.MustCompile(want).MatchString(steps[i]) {
				t.Errorf("step %d (%s): output does not match %q:\n%s", i, check.step, want, steps[i])
			}
		}
	}
}

var (
	capgateOnce sync.Once
	capgateBin  string
	capgateErr  error
)

// startDevProcess builds capgate (once) and runs `capgate dev` with its
// data in work/capgate-data on free ports; it returns the binary once the
// dev stack's gateway is ready and its Kafka listener is exported.
func startDevProcess(t testing.TB, work string, extra ...string) (bin string, log func() string) {
	t.Helper()
	capgateOnce.Do(func() {
		dir, err := os.MkdirTemp("", "capgate-bin")
		if err != nil {
			capgateErr = err
			return
		}
		var b stack.Binaries
		b, capgateErr = stack.Build(dir, false)
		capgateBin = b.Capgate
	})
	if capgateErr != nil {
		t.Fatal(capgateErr)
	}
	data := filepath.Join(work, "capgate-data")
	args := append([]string{"dev", "--data-dir", data, "--broker-addr", "127.0.0.1:0", "--coordinator-addr", "127.0.0.1:0",
		"--gateway-addr", "127.0.0.1:0", "--kafka-addr", "127.0.0.1:0"}, extra...)
	cmd := exec.Command(capgateBin, args...)
	cmd.Env = stack.CleanEnv()
	var logs strings.Builder
	var mu sync.Mutex
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			mu.Lock()
			logs.WriteString(sc.Text() + "\n")
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	env := map[string]string{}
	sdk.Eventually(t, 60*time.Second, "capgate dev ready with its Kafka listener", func() (bool, string) {
		b, err := os.ReadFile(filepath.Join(data, "credentials.env"))
		if err != nil {
			return false, err.Error()
		}
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "="); ok {
				env[k] = v
			}
		}
		if env["CAPGATE_KAFKA_BOOTSTRAP"] == "" {
			return false, "no CAPGATE_KAFKA_BOOTSTRAP yet"
		}
		client := &http.Client{Timeout: 2 * time.Second, Transport: devTransport(t, env)}
		resp, err := client.Get(strings.Split(env["CAPGATE_GATEWAY_URLS"], ",")[0] + "/readyz")
		if err != nil {
			mu.Lock()
			defer mu.Unlock()
			return false, err.Error() + "\n" + logs.String()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	return capgateBin, func() string {
		mu.Lock()
		defer mu.Unlock()
		return logs.String()
	}
}

// writeReadmeKgo writes the README's Go block as dir/main.go in a module
// of its own requiring franz-go at this repository's versions (go.sum
// copied), so `go run .` works offline from the module cache.
func writeReadmeKgo(t testing.TB, dir, src string) {
	t.Helper()
	root, err := stack.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	repoMod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	var mod strings.Builder
	mod.WriteString("module readme\n\n")
	for _, line := range strings.Split(string(repoMod), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "go "):
			mod.WriteString(line + "\n\nrequire (\n")
		case strings.HasPrefix(line, "github.com/twmb/franz-go "), strings.HasPrefix(line, "github.com/twmb/franz-go/pkg/kmsg "),
			strings.HasPrefix(line, "github.com/klauspost/compress "), strings.HasPrefix(line, "github.com/pierrec/lz4/v4 "):
			mod.WriteString("\t" + strings.TrimSuffix(line, " // indirect") + "\n")
		}
	}
	mod.WriteString(")\n")
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"main.go": src, "go.mod": mod.String(), "go.sum": string(sum)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// devTransport trusts the dev stack's CA when it serves TLS.
func devTransport(t testing.TB, env map[string]string) http.RoundTripper {
	t.Helper()
	if env["CAPGATE_CACERT"] == "" {
		return http.DefaultTransport
	}
	pem, err := os.ReadFile(env["CAPGATE_CACERT"])
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
}
