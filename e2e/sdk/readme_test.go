package sdk_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/capgate/capgate/e2e/sdk"
	"github.com/capgate/capgate/internal/stack"
)

const readmeSDKSection = "## Use the Go SDK"

// TestReadmeGoSDK holds README.md's "Use the Go SDK" program to the code:
// the section's Go block is built as it stands, in a module of its own
// that requires this repository (replace, go.sum copied, offline from the
// module cache), and run as the README says — against a real stack, with
// the environment capgate dev writes, the gateways as one comma-separated
// list. It prints every record, and Ctrl-C (SIGINT) ends it with exit
// status 0, exactly the printed records committed and the member gone
// from the group (not left to time out). So the README's shutdown is the
// right one and its code compiles against the SDK of this commit.
func TestReadmeGoSDK(t *testing.T) {
	t.Parallel()
	bin := buildReadmeSDK(t)
	const partitions, perPartition = 3, 2
	c := sdk.StartCluster(t, sdk.ClusterOptions{Topic: "demo", Partitions: partitions, Gateways: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for p := range int32(partitions) {
		for i := range perPartition {
			if _, err := c.Broker.Produce(ctx, c.Topic, p, []*kgo.Record{{Value: fmt.Appendf(nil, "r%d", i)}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = append(os.Environ(),
		"CAPGATE_COORDINATOR_URL="+c.CoordinatorURL,
		"CAPGATE_GATEWAY_URLS="+strings.Join(c.GatewayURLs(), ","),
		"CAPGATE_CACERT=",
		"CAPGATE_CREDENTIAL="+c.ClientCredential(t, "sdk-readme"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := lineByLine(stdout)
	printed := map[string]bool{}
	for len(printed) < partitions*perPartition {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("the program ended after printing %v: %v\n%s", printed, cmd.Wait(), stderr.String())
			}
			printed[line] = true
		case <-ctx.Done():
			t.Fatalf("printed %v, want %d records\n%s", printed, partitions*perPartition, stderr.String())
		}
	}
	for p := range partitions {
		for o := range perPartition {
			if want := fmt.Sprintf("demo/%d@%d r%d", p, o, o); !printed[want] {
				t.Errorf("did not print %q: %v", want, printed)
			}
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil { // Ctrl-C
		t.Fatal(err)
	}
	for range lines { // drain to EOF
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("after Ctrl-C: %v\n%s", err, stderr.String())
	}
	checkLeftAndCommitted(t, c, "sdk-readme", perPartition)
}

// buildReadmeSDK builds the README section's Go block in a module of its
// own that requires this repository by a replace directive, offline
// (GOPROXY=off: every module comes from the cache the repository's own
// build filled).
func buildReadmeSDK(t *testing.T) string {
	t.Helper()
	root, err := stack.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	src := readmeGoBlock(t, root)
	dir := t.TempDir()
	mod := "module readme\n\ngo 1.26.8\n\nrequire github.com/capgate/capgate v0.0.0\n\nreplace github.com/capgate/capgate => " + root + "\n"
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"main.go": src, "go.mod": mod, "go.sum": string(sum)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "readme")
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("README %q: the Go block does not build: %v\n%s\n%s", readmeSDKSection, err, out, src)
	}
	return bin
}

// readmeGoBlock is the first ```go block of the README section.
func readmeGoBlock(t *testing.T, root string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	start := strings.Index(text, "\n"+readmeSDKSection+"\n")
	if start < 0 {
		t.Fatalf("README.md has no %q section", readmeSDKSection)
	}
	text = text[start+len(readmeSDKSection)+2:]
	if end := strings.Index(text, "\n## "); end >= 0 {
		text = text[:end]
	}
	_, block, ok := strings.Cut(text, "```go\n")
	if block, _, ok2 := strings.Cut(block, "\n```\n"); ok && ok2 {
		return block + "\n"
	}
	t.Fatalf("README %q has no ```go block", readmeSDKSection)
	return ""
}

// TestReadmeGoSDKSaysAGatewayDoesNotAnswer: the README program with a
// wrong gateway address — a port nothing listens on — printed nothing at
// all, for as long as it ran: the SDK retries a gateway that does not
// answer for ever and logged nothing without a logger (newuser7). The
// program passes client.WithSlog(slog.Default()), so the warning comes
// on stderr, naming the gateway; Ctrl-C still ends it with status 0.
func TestReadmeGoSDKSaysAGatewayDoesNotAnswer(t *testing.T) {
	t.Parallel()
	bin := buildReadmeSDK(t)
	c := sdk.StartCluster(t, sdk.ClusterOptions{Topic: "demo", Partitions: 2})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now: connection refused
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = append(os.Environ(),
		"CAPGATE_COORDINATOR_URL="+c.CoordinatorURL,
		"CAPGATE_GATEWAY_URLS="+closed,
		"CAPGATE_CACERT=",
		"CAPGATE_CREDENTIAL="+c.ClientCredential(t, "sdk-readme"))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := lineByLine(stderr)
	const warned = "fetch failed: the gateway did not answer"
	var said []string
	for warning := ""; warning == ""; {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("the program ended: %v\n%s", cmd.Wait(), strings.Join(said, "\n"))
			}
			said = append(said, line)
			if strings.Contains(line, warned) {
				warning = line
				if !strings.Contains(line, "WARN "+warned) || !strings.Contains(line, "gateway="+closed) {
					t.Errorf("the warning does not name the gateway at WARN: %s", line)
				}
			}
		case <-ctx.Done():
			t.Fatalf("the README program said nothing of the gateway at %s that does not answer; stderr:\n%s", closed, strings.Join(said, "\n"))
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for range lines { // drain to EOF
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("after Ctrl-C: %v\n%s", err, strings.Join(said, "\n"))
	}
}

// lineByLine sends r's lines, closing the channel at EOF.
func lineByLine(r io.Reader) <-chan string {
	lines := make(chan string)
	go func() {
		defer close(lines)
		for s := bufio.NewScanner(r); s.Scan(); {
			lines <- s.Text()
		}
	}()
	return lines
}
