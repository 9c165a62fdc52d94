package main

import (
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/internal/coordinators/coordinatorstest"
)

// TestAdminConnectErrorsSayWhatToDo: a wrong --coordinator got Go's bare
// transport error (newuser #4): connection refused, a scheme the server
// does not speak, an untrusted certificate, HOST:PORT without a scheme
// (with the client package's "client:" prefix). Each now says the flag
// or variable that fixes it.
func TestAdminConnectErrorsSayWhatToDo(t *testing.T) {
	plain := httptest.NewServer(http.NotFoundHandler())
	defer plain.Close()
	goTLS := httptest.NewUnstartedServer(http.NotFoundHandler()) // answers plaintext with Go's 400
	goTLS.Config.ErrorLog = log.New(io.Discard, "", 0)
	goTLS.StartTLS()
	defer goTLS.Close()
	closer := tlsClosingServer(t) // answers plaintext by closing, as capgate's listeners do
	kafkaPort := closingServer(t) // reads a request and closes, as a Kafka port does
	httpsTo := func(u string) string { return strings.Replace(u, "http://", "https://", 1) }
	httpTo := func(u string) string { return strings.Replace(u, "https://", "http://", 1) }
	for _, c := range []struct {
		name, coordinator string
		want              []string
		usage             bool
	}{
		{"refused", coordinatorstest.Down(t), []string{"connection refused", "is the coordinator running", "--coordinator or CAPGATE_COORDINATOR_URL"}, false},
		{"host:port", "127.0.0.1:7070", []string{`--coordinator "127.0.0.1:7070": want a URL: use http://127.0.0.1:7070 (or https://127.0.0.1:7070`}, true},
		{"bad scheme", "ftp://127.0.0.1:7070", []string{"--coordinator: coordinator URL must be an http(s) URL"}, true},
		{"https to plain HTTP", httpsTo(plain.URL), []string{"the server speaks plain HTTP: use http://" + strings.TrimPrefix(plain.URL, "http://")}, false},
		{"http to a TLS server that closes", "http://" + closer, []string{"EOF", "the server speaks TLS: use https://" + closer}, false},
		{"http to a Kafka port", "http://" + kafkaPort, []string{"closed the connection without an HTTP answer: is it a Kafka port", "--coordinator or CAPGATE_COORDINATOR_URL"}, false},
		{"http to Go's TLS server", httpTo(goTLS.URL), []string{"400 Bad Request", "the server speaks TLS: use https://"}, false},
		{"unknown CA", goTLS.URL, []string{"certificate signed by unknown authority", "pass --cacert FILE or set CAPGATE_CACERT"}, false},
	} {
		_, err := run(t, "admin", "groups", "--coordinator", c.coordinator, "--token", "x")
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q, want %q", c.name, err, w)
			}
		}
		if strings.Contains(err.Error(), "client:") {
			t.Errorf("%s: %q names the client package", c.name, err)
		}
		if got := exitCode(err) == exitUsage; got != c.usage {
			t.Errorf("%s: usage error %v, want %v", c.name, got, c.usage)
		}
	}
}

// closingServer is a TCP listener that reads what a connection sends and
// closes it — a Kafka port given an HTTP request; its address.
func closingServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveConns(t, ln, func(c net.Conn) { c.Read(make([]byte, 4096)) })
}

// silentServer takes connections and never answers on them, as Kafka
// takes an HTTP request; its address.
func silentServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	return serveConns(t, ln, func(net.Conn) { <-done })
}

// serveConns accepts ln's connections until the test ends, hands each to
// handle and closes it after; ln's address.
func serveConns(t *testing.T, ln net.Listener, handle func(net.Conn)) string {
	t.Helper()
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
	return ln.Addr().String()
}

// tlsClosingServer is a TLS listener that closes a connection whose
// handshake fails (a plaintext request), as a TLS proxy may (capgate's
// own listeners answer 400 "use https://"); its address.
func tlsClosingServer(t *testing.T) string {
	t.Helper()
	cert := httptest.NewUnstartedServer(nil)
	cert.StartTLS() // only for its certificate
	cfg := cert.TLS.Clone()
	cert.Close()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	return serveConns(t, ln, func(c net.Conn) { c.(*tls.Conn).Handshake() })
}

// TestAdminNotARouteHintsOnce: a URL that is not a coordinator's base
// printed the server's hint and the CLI's, two questions about two base
// URLs (newuser #4); the CLI's alone now, after the route.
func TestAdminNotARouteHintsOnce(t *testing.T) {
	base, admin := startCoordinator(t)
	_, err := run(t, "admin", "groups", "--coordinator", base+"/v1", "--token", admin)
	if err == nil || strings.Count(err.Error(), "base URL") != 1 || !strings.Contains(err.Error(), `no such route: "/v1/v1/admin/groups": is `+base+"/v1 a capgate coordinator?") {
		t.Fatalf("--coordinator with a path: %v", err)
	}
}

// TestAdminTimeoutSaysWhatToCheck: --coordinator pointed at capgate dev's
// embedded Kafka (a port that takes an HTTP request and never answers)
// waited the CLI's minute and ended "Client.Timeout exceeded while
// awaiting headers" and no more (newuser5); it says what to check. The
// timeout is lowered here, the server answers nothing ever.
func TestAdminTimeoutSaysWhatToCheck(t *testing.T) {
	defer func(d time.Duration) { adminTimeout = d }(adminTimeout)
	adminTimeout = 200 * time.Millisecond
	silent := silentServer(t)
	_, err := run(t, "admin", "groups", "--coordinator", "http://"+silent, "--token", "x")
	if err == nil || !strings.Contains(err.Error(), "no answer from "+silent+" within 200ms") ||
		!strings.Contains(err.Error(), "not a Kafka port") {
		t.Fatalf("a coordinator URL that never answers: %v", err)
	}
}

// TestConsumeConnectErrorsSayWhatToDo: consume's join to a coordinator
// that is not running, or to a Kafka port, was "connection refused" /
// "connection reset by peer" bare (newuser5); it says which flag fixes it,
// as the admin commands do. A port that takes the request and never
// answers (capgate dev's embedded Kafka, 9092) was "request_timeout passed
// without an answer" after 10 s, bare (newuser6).
func TestConsumeConnectErrorsSayWhatToDo(t *testing.T) {
	silent := silentServer(t)
	for name, c := range map[string]struct{ url, want string }{
		"not running":   {coordinatorstest.Down(t), "is the coordinator running"},
		"a Kafka port":  {"http://" + closingServer(t), "is it a Kafka port"},
		"never answers": {"http://" + silent, "no answer from " + silent + " within 10s, where the coordinator answers at once"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel() // each waits out the SDK's join retries (request_timeout)
			_, err := run(t, "consume", "-g", "g", "-t", "demo", "--credential", "x.y.z", "--coordinator", c.url, "--gateways", c.url)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "--coordinator or CAPGATE_COORDINATOR_URL") {
				t.Errorf("%v, want %q and the flag", err, c.want)
			}
		})
	}
}
