package crlf_test

import (
	"bufio"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/internal/crlf"
)

// serve runs a fasthttp server on ln watched by crlf: it answers 200
// with the body's length, and a read error 400 with the error's message.
func serve(t *testing.T, ln net.Listener, handler fasthttp.RequestHandler) {
	t.Helper()
	if handler == nil {
		handler = func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("body " + strings.Repeat("x", len(ctx.PostBody()))) }
	}
	s := &fasthttp.Server{
		Handler:     handler,
		ReadTimeout: time.Minute, // what a refusal must not wait for
		ErrorHandler: func(ctx *fasthttp.RequestCtx, err error) {
			ctx.SetStatusCode(fasthttp.StatusBadRequest)
			if r := crlf.Refusal(err); r != nil {
				ctx.SetBodyString(r.Error())
			}
		},
	}
	go s.Serve(crlf.Listener(ln)) //nolint:errcheck // ends with Shutdown
	t.Cleanup(func() { _ = s.Shutdown() })
}

// exchange writes raw on conn and reads n answers.
func exchange(t *testing.T, conn net.Conn, raw string, n int) []string {
	t.Helper()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	var answers []string
	for range n {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("answer %d: %v", len(answers)+1, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		answers = append(answers, resp.Status+": "+string(b))
	}
	if b, err := br.ReadByte(); err == nil || !isClosed(err) {
		answers = append(answers, "then "+string(b)+" / "+errString(err))
	}
	return answers
}

func isClosed(err error) bool { return err == io.EOF || strings.Contains(err.Error(), "reset") }

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

// TestKeepAliveStreamWithABareLFHead: on one connection, pipelined in
// one write, a POST whose body holds bare LFs and blank lines and a GET
// are served; the head after them, whose lines end in bare LFs, is
// refused at once with ErrBareLF (not held until read_timeout) and the
// connection closed.
func TestKeepAliveStreamWithABareLFHead(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serve(t, ln, nil)
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := "a\n\nb\n\nGET / HTTP/1.1\n\n"
	raw := "POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 22\r\n\r\n" + body +
		"GET /g HTTP/1.1\r\nHost: x\r\n\r\n" +
		"GET /healthz HTTP/1.1\nHost: x\n\n"
	got := exchange(t, conn, raw, 3)
	want := []string{"200 OK: body " + strings.Repeat("x", len(body)), "200 OK: body ", "400 Bad Request: " + crlf.ErrBareLF.Error()}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("answers:\n%s\nwant:\n%s\nand the connection closed", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestWatchedTLSConnection: under TLS the watched connection still tells
// fasthttp it is TLS, with the client's certificate; exposes the TCP
// descriptor (the gateway's hangup watch) and the TCP connection below
// (internal/linger); and refuses a bare-LF head.
func TestWatchedTLSConnection(t *testing.T) {
	cert := selfSigned(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tlsLn := tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAnyClientCert})
	serve(t, tlsLn, func(ctx *fasthttp.RequestCtx) {
		conn := ctx.Conn()
		sc, ok := conn.(syscall.Conn)
		_, scErr := sc.SyscallConn()
		below := conn
		for {
			u, ok := below.(interface{ NetConn() net.Conn })
			if !ok {
				break
			}
			below = u.NetConn()
		}
		_, tcp := below.(*net.TCPConn)
		state := ctx.TLSConnectionState()
		ctx.SetBodyString(strings.Join([]string{
			"tls=" + boolString(ctx.IsTLS()),
			"peer=" + boolString(state != nil && len(state.PeerCertificates) == 1),
			"syscall=" + boolString(ok && scErr == nil),
			"tcp=" + boolString(tcp),
		}, " "))
	})
	conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	got := exchange(t, conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\nHost: x\n\n", 2)
	want := []string{"200 OK: tls=true peer=true syscall=true tcp=true", "400 Bad Request: " + crlf.ErrBareLF.Error()}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("answers:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "crlf-test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
