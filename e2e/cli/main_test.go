package cli_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/capgate/capgate/internal/stack"
)

// capgate is the binary under test, built once by TestMain.
var capgate string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "capgate-e2e-cli-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin, err := stack.Build(dir, false)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	capgate = bin.Capgate
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// syncBuffer is a bytes.Buffer safe for a process writing while the test
// reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// devProcess is a running `capgate dev`.
type devProcess struct {
	t           *testing.T
	cmd         *exec.Cmd
	stdout      *syncBuffer
	stderr      *syncBuffer
	exited      chan struct{}
	waitErr     error
	dataDir     string
	broker      string // host:port
	coordinator string // URL
	gateway     string // URL
}

var bannerAddress = map[string]*regexp.Regexp{
	"kafka":       regexp.MustCompile(`(?m)^\s+kafka:\s+(\S+)`),
	"coordinator": regexp.MustCompile(`(?m)^\s+coordinator:\s+(\S+)`),
	"gateway":     regexp.MustCompile(`(?m)^\s+gateway:\s+(\S+)`),
}

// startDev runs `capgate dev` on free ports (port 0) with dataDir, reads
// the addresses it prints and waits until its gateway is ready.
func startDev(t *testing.T, dataDir string, extra ...string) *devProcess {
	t.Helper()
	args := append([]string{"dev", "--data-dir", dataDir,
		"--broker-addr", "127.0.0.1:0", "--coordinator-addr", "127.0.0.1:0", "--gateway-addr", "127.0.0.1:0", "--kafka-addr", "127.0.0.1:0"}, extra...)
	d := &devProcess{t: t, cmd: exec.Command(capgate, args...), stdout: &syncBuffer{}, stderr: &syncBuffer{}, exited: make(chan struct{}), dataDir: dataDir}
	d.cmd.Stdout, d.cmd.Stderr, d.cmd.Env = d.stdout, d.stderr, stack.CleanEnv()
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("start capgate dev: %v", err)
	}
	go func() { d.waitErr = d.cmd.Wait(); close(d.exited) }()
	t.Cleanup(func() { d.stop(false) })
	d.waitBanner(20 * time.Second)
	hc := http.DefaultClient
	if slices.Contains(extra, "--tls") { // trust the CA it made
		hc = caClient(t, filepath.Join(dataDir, "tls", "ca.crt"))
	}
	waitReady(t, hc, d.gateway+"/readyz", 20*time.Second)
	return d
}

func (d *devProcess) waitBanner(timeout time.Duration) {
	d.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		out := d.stdout.String()
		if strings.Contains(out, "capgate dev is ready") {
			found := map[string]string{}
			for name, re := range bannerAddress {
				if m := re.FindStringSubmatch(out); m != nil {
					found[name] = m[1]
				}
			}
			if len(found) == len(bannerAddress) {
				d.broker, d.coordinator, d.gateway = found["kafka"], found["coordinator"], found["gateway"]
				return
			}
		}
		select {
		case <-d.exited:
			d.t.Fatalf("capgate dev exited before it was ready: %v\nstdout:\n%s\nstderr:\n%s", d.waitErr, out, d.stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("capgate dev printed no addresses within %s\nstdout:\n%s\nstderr:\n%s", timeout, out, d.stderr.String())
		}
	}
}

// stop sends SIGINT and waits for a clean exit; check makes a non-zero
// exit or a slow shutdown a test failure.
func (d *devProcess) stop(check bool) {
	d.t.Helper()
	select {
	case <-d.exited:
		return
	default:
	}
	d.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-d.exited:
	case <-time.After(20 * time.Second):
		d.cmd.Process.Kill()
		<-d.exited
		if check {
			d.t.Errorf("capgate dev did not stop within 20s of SIGINT\nstderr:\n%s", d.stderr.String())
		}
		return
	}
	if check && d.waitErr != nil {
		d.t.Errorf("capgate dev exited with %v after SIGINT\nstderr:\n%s", d.waitErr, d.stderr.String())
	}
}

// waitReady polls url until it answers 200.
func waitReady(t *testing.T, hc *http.Client, url string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		resp, err := hc.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			err = errors.New(resp.Status)
		}
		last = err
		time.Sleep(20 * time.Millisecond) // poll interval, not an assertion
	}
	t.Fatalf("%s not ready within %s: %v", url, timeout, last)
}

// run runs the capgate binary with args and stdin, bounded by timeout, and
// returns stdout; a non-zero exit fails the test with stderr.
func run(t *testing.T, timeout time.Duration, stdin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, capgate, args...)
	cmd.Stdin, cmd.Env = strings.NewReader(stdin), stack.CleanEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("capgate %s: %v (timeout %s)\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, timeout, stdout.String(), stderr.String())
	}
	return stdout.String()
}
