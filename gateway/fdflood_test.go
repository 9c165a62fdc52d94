package gateway

import (
	"bufio"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
)

// fdfloodChild marks the subprocess of TestDescriptorFloodKeepsServing.
const fdfloodChild = "CAPGATE_TEST_FDFLOOD_CHILD"

// TestDescriptorFloodKeepsServing is redteam6 #0 as a test: a connection
// flood that uses up the process's file descriptors made accept fail
// with EMFILE, fasthttp's Serve returned, and the gateway process shut
// down. It runs in a subprocess (its descriptor limit is lowered): the
// flood dials the gateway until no descriptor is left (the gateway's
// accept fails too), then frees them; the gateway answers again and its
// Serve never returned. Fails without internal/connguard's retry: Serve
// returned "accept4: too many open files".
func TestDescriptorFloodKeepsServing(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("counts descriptors in /proc/self/fd")
	}
	if os.Getenv(fdfloodChild) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestDescriptorFloodKeepsServing$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), fdfloodChild+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestDescriptorFloodKeepsServing") {
			t.Fatalf("subprocess: %v\n%s", err, out)
		}
		return
	}
	h := newHarness(t, nil)
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var saved syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &saved); err != nil {
		t.Fatal(err)
	}
	low := saved
	low.Cur = uint64(len(fds) + 64)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	var flood []net.Conn
	for {
		c, err := net.Dial("tcp", h.gw.Addr())
		if err != nil {
			if !errors.Is(err, syscall.EMFILE) {
				t.Fatalf("flood dial: %v, want EMFILE", err)
			}
			break
		}
		flood = append(flood, c)
	}
	// The gateway's accept has a connection waiting and no descriptor.
	waitFor(t, "the gateway's accept to fail", func() bool {
		return len(h.gw.serveDone) > 0 || metricValue(t, h.gw, "capgate_gateway_http_accept_errors_total") > 0
	})
	for _, c := range flood {
		c.Close()
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &saved); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-h.gw.serveDone:
		t.Fatalf("Serve returned under the flood (the process would exit): %v", err)
	default:
	}
	if status, _ := rawGet(t, "", h.gw.Addr(), "/healthz"); status != 200 {
		t.Fatalf("/healthz after the flood: %d", status)
	}
	if len(h.gw.serveDone) > 0 {
		t.Fatal("Serve returned")
	}
}

// metricValue is the sum of a metric's samples (0 when absent).
func metricValue(t *testing.T, g *Gateway, name string) float64 {
	t.Helper()
	families, err := g.metrics.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}

// rawGet dials addr (from local, "" for any), sends GET path and reads
// the answer, keeping the connection open until the test ends; status 0
// when the connection failed or closed without an answer.
func rawGet(t *testing.T, local, addr, path string) (int, *http.Response) {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second}
	if local != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(local)}
	}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write([]byte("GET " + path + " HTTP/1.1\r\nHost: gw\r\n\r\n")); err != nil {
		return 0, nil
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, nil
	}
	return resp.StatusCode, resp
}

// TestConnectionsPerAddressAreBounded is redteam6 #1 as a test: one
// address held every HTTP connection slot. With
// max_connections_per_address 3, the fourth keep-alive connection from
// 127.0.0.1 is answered 503 overloaded in capgate's JSON (Retry-After),
// not fasthttp's plain text, while 127.0.0.2 is still served. Fails
// without the bound: the fourth connection was served (200).
func TestConnectionsPerAddressAreBounded(t *testing.T) {
	h := newHarnessWith(t, harnessOptions{edit: func(c *Config) { c.MaxConnections, c.MaxConnectionsPerAddress = 100, 3 }})
	h.waitReady()
	for i := range 3 {
		if status, _ := rawGet(t, "127.0.0.1", h.gw.Addr(), "/healthz"); status != 200 {
			t.Fatalf("connection %d from 127.0.0.1: %d", i+1, status)
		}
	}
	status, resp := rawGet(t, "127.0.0.1", h.gw.Addr(), "/healthz")
	if status != 503 {
		t.Fatalf("a fourth connection from 127.0.0.1 (max_connections_per_address 3): %d, want 503", status)
	}
	checkOverloaded(t, resp, "max_connections_per_address")
	if status, _ := rawGet(t, "127.0.0.2", h.gw.Addr(), "/healthz"); status != 200 {
		t.Fatalf("a connection from 127.0.0.2 while 127.0.0.1 is at its bound: %d", status)
	}
}

// checkOverloaded checks a refusal at accept: 503, JSON overloaded
// naming limit, Retry-After.
func checkOverloaded(t *testing.T, resp *http.Response, limit string) {
	t.Helper()
	defer resp.Body.Close()
	var body api.ErrorBody
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("refusal body is not capgate's JSON error: %v", err)
	}
	if body.Error.Code != api.CodeOverloaded || body.Error.Details["limit"] != limit {
		t.Fatalf("refusal: %+v, want overloaded naming %s", body.Error, limit)
	}
	if resp.Header.Get("Retry-After") == "" || !api.IsJSON([]byte(resp.Header.Get("Content-Type"))) {
		t.Fatalf("refusal headers: %v", resp.Header)
	}
}

// TestExpectContinueRefusedBeforeTheBody is redteam6 #9 as a test: a
// produce sent with "Expect: 100-continue" was answered "100 Continue"
// before its bearer or its body cap was looked at, inviting 4 MB that
// would be refused. Without a bearer it is answered 401 at once, and with
// a bearer whose capability cannot produce, over the 4 KiB cap, 413 — no
// 100 Continue either way. Fails without the ExpectHandler: the first
// line read is "HTTP/1.1 100 Continue".
func TestExpectContinueRefusedBeforeTheBody(t *testing.T) {
	h := newHarness(t, nil)
	fetchOnly, _ := h.mint(capClaims(0))
	records := "/v1/topics/" + testTopic + "/partitions/0/records"
	for _, tc := range []struct {
		name, request, auth string
		status              int
		code                api.Code
	}{
		{"no bearer", "POST " + records, "", 401, api.CodeUnauthorized},
		{"a fetch capability over the small cap", "POST " + records, "Authorization: Bearer " + fetchOnly + "\r\n", 413, api.CodeBodyTooLarge},
		{"a fetch announcing a large body", "GET " + records + "?offset=0", "Authorization: Bearer " + fetchOnly + "\r\n", 413, api.CodeBodyTooLarge},
	} {
		conn, err := net.Dial("tcp", h.gw.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		head := tc.request + " HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n" +
			tc.auth + "Content-Length: 4000000\r\nExpect: 100-continue\r\n\r\n"
		if _, err := conn.Write([]byte(head)); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if resp.StatusCode != tc.status {
			t.Fatalf("%s: first answer %d %s, want %d (no 100 Continue)", tc.name, resp.StatusCode, resp.Status, tc.status)
		}
		var body api.ErrorBody
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Error.Code != tc.code {
			t.Fatalf("%s: body %+v (%v), want %s", tc.name, body, err, tc.code)
		}
	}
}
