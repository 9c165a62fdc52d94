package tlsconf

// Behavior: a plaintext HTTP request sent to a TLS port (an http:// URL
// where https:// was meant) is answered, in plaintext, 400 bad_request
// with a JSON error body saying "this port speaks TLS: use https://",
// and the connection is closed — as Go's net/http answers it ("Client
// sent an HTTP request to an HTTPS server"). Without it the handshake
// failed on the request's first bytes and the connection was closed
// without a word: curl printed nothing, and the SDK read EOF, took it
// for a gateway that did not answer and retried for ever.
//
// How: HTTPListener reads each connection through a conn that looks at
// the first bytes the TLS handshake reads, before crypto/tls parses
// them. A TLS record starts with its content type (0x14–0x18; SSLv2's
// hello with a byte ≥ 0x80); every HTTP method starts with an uppercase
// letter. On a letter it writes the answer on the connection below TLS
// and fails the read: the handshake fails, as it did, and the server's
// ErrorHandler closes the connection lingering (internal/linger), so the
// answer is not lost to a reset when the request's rest arrives. The
// look costs one branch per read and runs on the connection's own
// goroutine (the handshake's first read), never in Accept. The answer carries HeaderTLSRequired
// so a client tells it from any other 400 without reading its message
// (client/: a configuration error, not retried).
//
// Only the HTTP listeners use it (the coordinator's, a replica's, the
// gateway's); the Kafka listener keeps Listener.

import (
	"crypto/tls"
	"errors"
	"net"
	"strconv"
	"syscall"
	"time"
)

// HeaderTLSRequired marks the plaintext 400 a TLS port answers to a
// plaintext HTTP request; its value is the scheme to use ("https").
const HeaderTLSRequired = "Capgate-Tls-Required"

// PlaintextMessage is that answer's error message.
const PlaintextMessage = "this port speaks TLS: use https://"

// plaintextWriteTimeout bounds the write of the answer.
const plaintextWriteTimeout = time.Second

// ErrPlaintextHTTP fails the handshake of a connection answered 400 for
// sending plaintext HTTP.
var ErrPlaintextHTTP = errors.New("tls: a plaintext HTTP request on a TLS port (answered 400: use https://)")

// plaintextAnswer is the whole plaintext answer.
var plaintextAnswer = func() []byte {
	body := `{"error":{"code":"bad_request","message":"` + PlaintextMessage + `"}}`
	return []byte("HTTP/1.1 400 Bad Request\r\n" +
		"Content-Type: application/json\r\n" +
		HeaderTLSRequired + ": https\r\n" +
		"Connection: close\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}()

// HTTPListener wraps ln so every connection speaks TLS, and a plaintext
// HTTP request is answered 400 in plaintext (see the Behavior above).
// Accept returns *tls.Conn, as Listener's.
func (s *Server) HTTPListener(ln net.Listener) net.Listener {
	return tls.NewListener(sniffListener{ln}, s.Config())
}

type sniffListener struct{ net.Listener }

func (l sniffListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &sniffConn{Conn: c}, nil
}

// sniffConn is a connection whose first bytes are looked at. Like a
// net.Conn it is read by one goroutine at a time.
type sniffConn struct {
	net.Conn
	sniffed bool
}

func (c *sniffConn) Read(p []byte) (int, error) {
	if c.sniffed {
		return c.Conn.Read(p)
	}
	n, err := c.Conn.Read(p)
	if n == 0 {
		return n, err
	}
	c.sniffed = true
	if p[0] < 'A' || p[0] > 'Z' {
		return n, err
	}
	c.answerPlaintext()
	return 0, ErrPlaintextHTTP
}

// answerPlaintext writes the 400 on the connection below TLS and ends
// the writing half: the client reads the answer's end at once, while the
// server lingers on what it still sends.
func (c *sniffConn) answerPlaintext() {
	_ = c.Conn.SetWriteDeadline(time.Now().Add(plaintextWriteTimeout))
	if _, err := c.Conn.Write(plaintextAnswer); err != nil {
		return
	}
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

// NetConn is the connection below (internal/linger unwraps through it).
func (c *sniffConn) NetConn() net.Conn { return c.Conn }

// SyscallConn is the raw connection below (the gateway's hangup watch,
// internal/crlf).
func (c *sniffConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.New("tlsconf: connection has no descriptor")
	}
	return sc.SyscallConn()
}
