package coordinator_test

import (
	"bufio"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// emfileListener fails its next fails accepts as an accept(2) out of
// file descriptors does, then accepts.
type emfileListener struct {
	net.Listener
	fails atomic.Int32
}

func (l *emfileListener) Accept() (net.Conn, error) {
	if l.fails.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// TestAcceptErrorsKeepServing is redteam6 #0 on the coordinator: an
// accept that fails with EMFILE (descriptors used up by a connection
// flood) ended fasthttp's Serve, and with it Run and the process. The
// listener fails its first 5 accepts so; the coordinator keeps serving
// and Run does not return. Fails without internal/connguard's retry:
// Run returned "coordinator: serve: accept tcp …: accept4: too many open
// files" and /healthz was refused.
func TestAcceptErrorsKeepServing(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &emfileListener{Listener: raw}
	ln.fails.Store(5)
	h := e.start(t, coordinator.WithListener(ln))
	if status, _, _ := h.do(t, http.MethodGet, "/healthz", "", nil); status != 200 {
		t.Fatalf("/healthz after 5 failed accepts: %d", status)
	}
	if n := ln.fails.Load(); n >= 0 {
		t.Fatalf("the listener's failures were not all met (%d left)", n+1)
	}
	select {
	case err := <-h.done:
		t.Fatalf("Run returned after failed accepts: %v", err)
	default:
	}
}

// TestConnectionsPerAddressAreBounded is redteam6 #1 on the coordinator:
// one address's keep-alive /healthz connections took every HTTP slot
// (joins, OAuth, the gateways' sync refused). With
// max_connections_per_address 3 the fourth connection from 127.0.0.1 is
// answered 503 overloaded in capgate's JSON with Retry-After (not
// fasthttp's plain text), and 127.0.0.2 is still served. Fails without
// the bound: the fourth connection was served.
func TestConnectionsPerAddressAreBounded(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	e.cfg.MaxConnectionsPerAddress = 3
	h := e.start(t)
	addr := h.c.Addr().String()
	for i := range 3 {
		if status, _ := rawRequest(t, "127.0.0.1", addr, "GET /healthz HTTP/1.1\r\nHost: c\r\n\r\n"); status != 200 {
			t.Fatalf("connection %d from 127.0.0.1: %d", i+1, status)
		}
	}
	status, body := rawRequest(t, "127.0.0.1", addr, "GET /healthz HTTP/1.1\r\nHost: c\r\n\r\n")
	if status != 503 || body == nil || body.Error.Code != api.CodeOverloaded || body.Error.Details["limit"] != "max_connections_per_address" {
		t.Fatalf("a fourth connection from 127.0.0.1: %d %+v, want 503 overloaded naming max_connections_per_address", status, body)
	}
	if status, _ := rawRequest(t, "127.0.0.2", addr, "GET /healthz HTTP/1.1\r\nHost: c\r\n\r\n"); status != 200 {
		t.Fatalf("a connection from 127.0.0.2 while 127.0.0.1 is at its bound: %d", status)
	}
}

// TestExpectContinueRefusedBeforeTheBody is redteam6 #9 on the
// coordinator: "Expect: 100-continue" was answered "100 Continue" before
// the bearer or the body cap was looked at. A join without a bearer is
// answered 401 at once, and one whose bearer is not a known token, with
// 4 MB announced, 413 — no 100 Continue. Fails without the
// ExpectHandler: the first answer is 100 Continue.
func TestExpectContinueRefusedBeforeTheBody(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	h := e.start(t)
	addr := h.c.Addr().String()
	for _, tc := range []struct {
		name, request, auth string
		status              int
		code                api.Code
	}{
		{"no bearer", "POST /v1/groups/g/join", "", 401, api.CodeUnauthorized},
		{"an unknown bearer over the small cap", "POST /v1/groups/g/join", "Authorization: Bearer not-a-token\r\n", 413, api.CodeBodyTooLarge},
		{"a GET announcing a large body", "GET /healthz", "", 413, api.CodeBodyTooLarge},
	} {
		head := tc.request + " HTTP/1.1\r\nHost: c\r\nContent-Type: application/json\r\n" + tc.auth +
			"Content-Length: 4000000\r\nExpect: 100-continue\r\n\r\n"
		status, body := rawRequest(t, "", addr, head)
		if status != tc.status || body == nil || body.Error.Code != tc.code {
			t.Fatalf("%s: first answer %d %+v, want %d %s (no 100 Continue)", tc.name, status, body, tc.status, tc.code)
		}
	}
}

// rawRequest dials addr (from local unless ""), writes request and reads
// the first answer, keeping the connection open until the test ends;
// status 0 when none came, body nil when it is not a JSON error.
func rawRequest(t *testing.T, local, addr, request string) (int, *api.ErrorBody) {
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
	if _, err := conn.Write([]byte(request)); err != nil {
		return 0, nil
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	if resp.StatusCode == 503 && resp.Header.Get("Retry-After") == "" {
		t.Errorf("503 without Retry-After")
	}
	var body api.ErrorBody
	if json.NewDecoder(resp.Body).Decode(&body) != nil || body.Error.Code == "" {
		return resp.StatusCode, nil
	}
	return resp.StatusCode, &body
}
