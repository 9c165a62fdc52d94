// Package crlf watches the request heads arriving on the HTTP servers of
// the coordinator and the gateway, and refuses at once a head fasthttp
// would wait on forever.
//
// Behavior: fasthttp ends a request head only at a CRLFCRLF somewhere in
// what it has buffered. A head whose lines end in a bare LF
// ("GET / HTTP/1.1\nHost: x\n\n", what netcat and hand-written clients
// send) was therefore never answered: the server waited for more bytes
// until read_timeout and then closed the connection without a word —
// and the same head followed by anything holding a CRLFCRLF (a chunked
// body's end, a pipelined request) was served, so whether a bare-LF
// request ran depended on what came after it. A connection from Listener
// reads through a scanner that follows each request's head and, for a
// Content-Length body, skips the body to the next head. When a head's
// request line or a header line, or the empty line ending it, ends in a
// bare LF, the reader passes the bytes up to that LF and then fails the
// next read with ErrBareLF; fasthttp hands that error to the server's
// ErrorHandler, which answers 400 bad_request (JSON) and closes. Empty
// lines before a request line are skipped, whatever their ending, as
// fasthttp skips them (RFC 9112 §2.2). A head whose request line starts
// with a byte no method can start with (a TLS handshake sent to a plain
// port) fails the same way at its first byte, with ErrNotHTTP — with
// ErrKafkaRequest when that byte is 0, a Kafka request's size: a Kafka
// client whose bootstrap servers name an HTTP port.
//
// Why refuse rather than read a bare LF as a line end, as net/http does
// and RFC 9112 §2.2 allows (a recipient MAY): fasthttp does not, so
// accepting would mean rewriting the stream in front of it — a second
// HTTP parser whose idea of where a head or a body ends must match
// fasthttp's byte for byte, the shape request smuggling lives in. No
// HTTP client library sends bare LFs; a proxy in front that reads them
// differently from us is exactly what an attacker would use. This reader
// never alters a byte: it only stops the stream at a bare LF, so when
// its framing and fasthttp's ever disagree the worst is a head left
// unwatched (answered at read_timeout, as before), never a request read
// differently.
//
// What it does not follow: a body framed by Transfer-Encoding, a head
// with more than one Content-Length, one it cannot parse, a folded line
// — the servers refuse the last three and close; after a chunked body the
// connection is simply no longer watched (its later heads are checked by
// fasthttp and the servers' header-line pass as before).
//
// Cost: one small struct per connection, and per head a scan of its
// line ends (bytes.IndexByte) and of the first bytes of each line. The
// connection is no longer a *net.TCPConn, so fasthttp sends a response
// larger than its write buffer with two writes instead of one writev.
// Conn forwards what the servers need from the connection below:
// SyscallConn (the gateway's hangup watch), NetConn (internal/linger),
// and on TLS connections Handshake and ConnectionState (fasthttp's
// IsTLS and TLSConnectionState, so client certificates are seen).
package crlf

import (
	"bytes"
	"crypto/tls"
	"errors"
	"net"
	"syscall"
)

var (
	// ErrBareLF fails the read after a request head's line ending in a
	// bare LF.
	ErrBareLF = errors.New("a request line or header line ends in a bare LF: HTTP/1.1 lines end in CRLF (RFC 9112 §2.2)")
	// ErrNotHTTP fails the read after a request line's first byte when no
	// method starts with it.
	ErrNotHTTP = errors.New("not an HTTP/1.1 request line (TLS sent to a plain-HTTP port?)")
	// ErrKafkaRequest is ErrNotHTTP for a first byte of 0: the start of
	// a Kafka request (its 4-byte size), what a Kafka client sends when
	// its bootstrap servers name an HTTP port (kcat -b gateway:8080).
	ErrKafkaRequest = errors.New("not an HTTP/1.1 request line: a Kafka request? (its size's first byte, 0): a Kafka client's bootstrap servers go to a gateway's Kafka listener (gateway.kafka_listen), not to an HTTP address")
)

// Refusal is the refusal err carries (ErrBareLF, ErrNotHTTP or
// ErrKafkaRequest), or nil.
// fasthttp wraps it in its own error; the servers' ErrorHandlers answer
// it 400 bad_request with its message.
func Refusal(err error) error {
	for _, r := range [...]error{ErrBareLF, ErrNotHTTP, ErrKafkaRequest} {
		if errors.Is(err, r) {
			return r
		}
	}
	return nil
}

// Listener returns ln whose accepted connections are watched.
func Listener(ln net.Listener) net.Listener { return listener{ln} }

type listener struct{ net.Listener }

func (l listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return Watch(c), nil
}

// Watch returns c read through the head scanner: a *Conn, or for a
// *tls.Conn one that also answers fasthttp's TLS questions.
func Watch(c net.Conn) net.Conn {
	w := &Conn{Conn: c}
	if t, ok := c.(*tls.Conn); ok {
		return &TLSConn{Conn: w, tls: t}
	}
	return w
}

// Conn is a connection whose reads are watched (see the package doc).
// Like any net.Conn it is read by one goroutine at a time.
type Conn struct {
	net.Conn
	s scanner
}

// Read reads from the connection below, passing bytes up to and
// including a refused line's LF; the read after fails with the refusal.
func (c *Conn) Read(p []byte) (int, error) {
	if c.s.refusal != nil {
		return 0, c.s.refusal
	}
	n, err := c.Conn.Read(p)
	if n > 0 && c.s.phase != phaseOff {
		if m := c.s.scan(p[:n]); c.s.refusal != nil {
			return m, nil
		}
	}
	return n, err
}

// NetConn is the connection below (internal/linger unwraps through it).
func (c *Conn) NetConn() net.Conn { return c.Conn }

// SyscallConn is the raw connection of the TCP connection below, under
// TLS too (the gateway's hangup watch peeks at it).
func (c *Conn) SyscallConn() (syscall.RawConn, error) {
	below := c.Conn
	if t, ok := below.(*tls.Conn); ok {
		below = t.NetConn()
	}
	sc, ok := below.(syscall.Conn)
	if !ok {
		return nil, errors.New("crlf: connection has no descriptor")
	}
	return sc.SyscallConn()
}

// TLSConn is a watched TLS connection.
type TLSConn struct {
	*Conn
	tls *tls.Conn
}

// Handshake runs the TLS handshake.
func (c *TLSConn) Handshake() error { return c.tls.Handshake() }

// ConnectionState is the TLS state (client certificates, ALPN).
func (c *TLSConn) ConnectionState() tls.ConnectionState { return c.tls.ConnectionState() }

type phase uint8

const (
	phaseHead phase = iota // in a head (or the empty lines before one)
	phaseBody              // skipping a Content-Length body
	phaseOff               // not watched any more
)

// lineKept is how much of a line the scanner keeps: enough for a
// Content-Length header with its value and some whitespace.
const lineKept = 64

// scanner follows the request stream of one connection.
type scanner struct {
	phase    phase
	started  bool // the head's request line has begun
	lineLen  int  // length of the current line so far, LF excluded
	lastCR   bool // the current line so far ends in CR
	line     [lineKept]byte
	lengths  int   // Content-Length lines in this head
	length   int64 // their value
	other    bool  // Transfer-Encoding, or a line not followed: unwatch after the head
	bodyLeft int64
	refusal  error
}

// scan follows p; it returns how many bytes of p may be passed on: all
// of them, or up to a refused line's LF (refusal is then set).
func (s *scanner) scan(p []byte) int {
	for i := 0; i < len(p); {
		switch s.phase {
		case phaseOff:
			return len(p)
		case phaseBody:
			n := min(int64(len(p)-i), s.bodyLeft)
			i += int(n)
			if s.bodyLeft -= n; s.bodyLeft == 0 {
				*s = scanner{}
			}
		case phaseHead:
			j := bytes.IndexByte(p[i:], '\n')
			if j < 0 {
				s.extend(p[i:])
				if s.refusal != nil {
					return i + 1
				}
				return len(p)
			}
			s.extend(p[i : i+j])
			if s.refusal != nil {
				return i + 1
			}
			i += j + 1
			if s.endLine(); s.refusal != nil {
				return i
			}
		}
	}
	return len(p)
}

// extend adds b (no LF in it) to the current line.
func (s *scanner) extend(b []byte) {
	if len(b) == 0 {
		return
	}
	if !s.started && s.lineLen == 0 && b[0] != '\r' && !isMethodByte(b[0]) {
		s.refusal = ErrNotHTTP
		if b[0] == 0 {
			s.refusal = ErrKafkaRequest
		}
		return
	}
	if s.lineLen < lineKept {
		copy(s.line[s.lineLen:], b)
	}
	s.lineLen += len(b)
	s.lastCR = b[len(b)-1] == '\r'
}

// endLine ends the current line at an LF.
func (s *scanner) endLine() {
	n, bare := s.lineLen, !s.lastCR
	if !bare {
		n--
	}
	s.lineLen, s.lastCR = 0, false
	switch {
	case n == 0 && !s.started:
		// an empty line before the request line: skipped, as fasthttp does
	case bare:
		s.refusal = ErrBareLF
	case !s.started:
		s.started = true // the request line
	case n == 0:
		s.endHead()
	default:
		s.header(s.line[:min(n, lineKept)], n > lineKept)
	}
}

// header notes a header line of the head (truncated when longer than
// lineKept).
func (s *scanner) header(line []byte, truncated bool) {
	if line[0] == ' ' || line[0] == '\t' {
		s.other = true // obs-fold: the servers refuse it and close
		return
	}
	if c := line[0] | 0x20; c != 'c' && c != 't' {
		return // neither Content-Length nor Transfer-Encoding
	}
	name, value, _ := bytes.Cut(line, []byte(":"))
	switch {
	case bytes.EqualFold(name, []byte("Content-Length")):
		s.lengths++
		v, ok := parseLength(value)
		s.length, s.other = v, s.other || truncated || !ok
	case bytes.EqualFold(name, []byte("Transfer-Encoding")):
		s.other = true
	}
}

// endHead starts what follows the head: its body, the next head, or
// nothing watched.
func (s *scanner) endHead() {
	switch {
	case s.other || s.lengths > 1:
		*s = scanner{phase: phaseOff}
	case s.lengths == 1 && s.length > 0:
		*s = scanner{phase: phaseBody, bodyLeft: s.length}
	default:
		*s = scanner{}
	}
}

// parseLength parses a Content-Length value: digits between optional
// spaces and tabs, at most 18 of them.
func parseLength(v []byte) (int64, bool) {
	v = bytes.Trim(v, " \t")
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// isMethodByte reports whether c may start a method (a token, RFC 9110
// §5.6.2).
func isMethodByte(c byte) bool {
	switch {
	case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		return true
	}
	return bytes.IndexByte([]byte("!#$%&'*+-.^_`|~"), c) >= 0
}
