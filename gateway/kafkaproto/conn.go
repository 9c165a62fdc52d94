package kafkaproto

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/ocap"
)

// conn is one client connection. Requests are read, handled and answered
// one at a time, in order, as a Kafka broker does: a long-polling Fetch
// holds the connection's later requests back (clients that mind open one
// connection per purpose). One frame is held at a time, bounded by
// max_request_bytes (PreAuthRequestBytes before SASL).
type conn struct {
	s        *Server
	nc       net.Conn
	remoteIP string
	remote   netip.Addr // the client's address (invalid if not TCP)
	// addr is what the connection counts against per address
	// (registry.go), when addrCounted.
	addr        netip.Addr
	addrCounted bool
	ctx         context.Context // ends when the connection closes
	cancel      context.CancelFunc
	opened      time.Time

	sasl      saslState
	mechanism string
	principal *Principal
	// reauthBy is when the session told to the client ends: the token's
	// expiry, or sooner at ReauthMax after it authenticated
	// (handleSASLAuthenticate). c's goroutine only.
	reauthBy time.Time
	identity string // identityKey counted for this connection (Server.mu), "" before SASL
	tenant   string // tenantKey counted with it
	// sessionEnd is when the session ends (reauthBy) and expiry
	// the timer that closes the connection then (Server.mu; registry.go).
	sessionEnd time.Time
	expiry     *time.Timer
	// requestTenant is tenant as c's goroutine knows it, and requestHeld
	// what the frame being read or served reserved (requestbudget.go)
	// under heldTenant: the tenant when it was reserved, which a
	// re-authentication inside that frame may have changed.
	requestTenant string
	requestHeld   int64
	heldTenant    string
	clientID      string // of the last request, as kept (keptClientID)
	// authed is set once SASL first completed (and never cleared): the
	// registry never closes such a connection for a new one.
	authed  atomic.Bool
	rawSASL bool // a SaslHandshake v0 was answered: a raw SASL frame follows
	// early is what watchHangUp read while a join ran (a pipelined
	// request's first bytes, ≤ earlyReadMax): read before the socket.
	early []byte
	// closeAfter closes the connection once the current response is
	// written (a failed authentication, say).
	closeAfter bool
	// askRoom: the answer being built, if it is of holdMin or more, is
	// sent only while its holder has room among the answers held
	// (answerRoom), else the connection closes unanswered (a Metadata
	// answer: handleMetadata). Reset by write.
	askRoom bool

	wbuf []byte
	// ahead queues the partitions read ahead (readahead.go); the
	// read-ahead goroutines chain onto it, hence the lock.
	aheadMu     sync.Mutex
	ahead       map[partKey][]*aheadEntry
	aheadClosed bool // the connection closes: no more read-aheads
	// afterWrite runs once the answer being built is written (or the
	// connection ends): it hands back the Kafka answer buffers the
	// answer's record batches alias (broker.FetchRawRecycled).
	afterWrite []func()
}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{s: s, nc: nc, opened: time.Now()}
	if host, _, err := net.SplitHostPort(nc.RemoteAddr().String()); err == nil {
		c.remoteIP = host
	}
	if a, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		c.remote = a.AddrPort().Addr()
	}
	c.ctx, c.cancel = context.WithCancel(s.base)
	return c
}

func (c *conn) serve() {
	defer c.s.unregister(c)
	defer c.cancel()
	defer c.nc.Close()
	defer c.dropAllAhead()
	defer c.written()
	defer c.releaseFrame()
	for {
		c.releaseFrame() // the last request has been answered
		if c.rawSASL {
			if err := c.rawAuthenticate(); err != nil {
				c.closing(err)
				return
			}
			continue
		}
		h, req, err := c.read()
		if err != nil {
			if h.key == 18 && errors.Is(err, errBadVersion) {
				if c.write(h.correlation, unsupportedApiVersions()) == nil {
					continue
				}
			}
			if errors.Is(err, errTooManyEntries) {
				c.refuseEntries(h, err)
			}
			c.closing(err)
			return
		}
		resp, err := c.dispatch(h, req)
		if err == nil && resp != nil {
			err = c.write(h.correlation, resp)
		}
		c.written()
		if err != nil {
			c.closing(err)
			return
		}
		if c.closeAfter {
			c.closing(errors.New("closed after the answer"))
			return
		}
	}
}

// written runs afterWrite: nothing refers to the answer's buffers now.
func (c *conn) written() {
	for _, f := range c.afterWrite {
		f()
	}
	clear(c.afterWrite)
	c.afterWrite = c.afterWrite[:0]
}

// refuseEntries counts and logs (within refusallog's bound) a request
// refused for naming more than kafka_max_request_partitions entries;
// the connection then closes (entries.go says why).
func (c *conn) refuseEntries(h header, err error) {
	var claims *ocap.Claims
	if c.principal != nil {
		claims = c.principal.Claims
	}
	c.s.gate.Observe(claims, OpRequest, api.CodeLimitExceeded, 0, time.Now())
	c.clientID = keptClientID(h.clientID)
	fields := append(c.logFields(false), zap.Int16("api_key", h.key), zap.Int16("api_version", h.version))
	c.s.refused.Refused("kafka request", err.Error()+": connection closed", fields...)
}

// closing logs why a connection ends; an idle or client-side close is
// normal and not worth more than debug.
func (c *conn) closing(err error) {
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || c.s.base.Err() != nil || c.logSecurityMismatch(err) {
		return
	}
	c.s.log.Debug("kafka connection closed", append(c.logFields(false), zap.Error(err))...)
}

// read reads and parses one request frame.
func (c *conn) read() (header, kmsg.Request, error) {
	limit := int32(PreAuthRequestBytes)
	if c.authenticated() {
		limit = c.s.cfg.MaxRequestBytes
	}
	body, err := c.readFrame(limit, 10)
	if err != nil {
		return header{}, nil, err
	}
	return parseRequest(body, c.s.cfg.MaxRequestPartitions)
}

// frameChunk is the buffer a request frame is first read into, grown
// (doubling) only as its bytes arrive.
const frameChunk = 64 << 10

// readFrame reads one size-prefixed frame of [least, limit] bytes. Before
// SASL completed the whole exchange must fit auth_timeout; after it, the
// connection may idle idle_timeout between requests; a frame, once its
// size arrived, must find room in the request budget (requestbudget.go)
// and arrive whole within read_timeout.
func (c *conn) readFrame(limit, least int32) ([]byte, error) {
	authDeadline := c.opened.Add(c.s.cfg.AuthTimeout)
	deadline := authDeadline
	if c.authenticated() {
		deadline = time.Now().Add(c.s.cfg.IdleTimeout)
	}
	var prefix [4]byte
	if err := c.readFull(prefix[:], deadline); err != nil {
		return nil, err
	}
	n, err := frameSize(prefix, least, limit)
	if err != nil {
		switch { // before SASL: a client of the wrong kind (mismatch.go)
		case c.authenticated():
		case looksLikeTLS(prefix):
			return nil, errTLSOnPlaintext
		case looksLikeHTTP(prefix):
			return nil, errHTTPOnKafka
		}
		return nil, err
	}
	bodyDeadline := time.Now().Add(c.s.cfg.ReadTimeout)
	if !c.authenticated() && authDeadline.Before(bodyDeadline) {
		bodyDeadline = authDeadline
	}
	if err := c.reserveFrame(int(n), bodyDeadline); err != nil {
		return nil, err
	}
	return c.readBody(int(n), bodyDeadline)
}

// readBody reads a frame body of n bytes into a buffer that grows as
// they arrive (frameChunk first, then doubling): the size a client
// announces is not memory set aside, so announcing max_request_bytes on
// every connection and sending nothing costs the gateway nothing.
func (c *conn) readBody(n int, deadline time.Time) ([]byte, error) {
	if err := c.nc.SetReadDeadline(deadline); err != nil {
		return nil, err
	}
	body := make([]byte, 0, min(n, frameChunk))
	body = body[:c.takeEarly(body[:cap(body)])]
	for len(body) < n {
		if len(body) == cap(body) {
			body = slices.Grow(body, min(n-len(body), len(body)))
		}
		m, err := c.nc.Read(body[len(body):min(cap(body), n)])
		body = body[:len(body)+m]
		if err != nil && len(body) < n {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return body, nil
}

func (c *conn) readFull(buf []byte, deadline time.Time) error {
	early := c.takeEarly(buf)
	if early == len(buf) {
		return nil
	}
	if err := c.nc.SetReadDeadline(deadline); err != nil {
		return err
	}
	_, err := io.ReadFull(c.nc, buf[early:])
	return err
}

func (c *conn) authenticated() bool { return c.sasl == saslDone || c.sasl == saslReauth }

// dispatch enforces the SASL order and session expiry, then runs the
// handler.
func (c *conn) dispatch(h header, req kmsg.Request) (kmsg.Response, error) {
	api, _ := lookupAPI(h.key) // parseRequest accepted only known keys
	switch {
	case !c.authenticated() && !api.preAuth:
		return nil, fmt.Errorf("%w: request key %d before authentication", errSASL, h.key)
	case c.sasl == saslReauth && h.key != int16(kmsg.SASLAuthenticate):
		return nil, fmt.Errorf("%w: request key %d inside a re-authentication", errSASL, h.key)
	case c.sasl == saslDone && !time.Now().Before(c.reauthBy) && h.key != int16(kmsg.SASLHandshake):
		return nil, fmt.Errorf("%w: session expired (KIP-368) and not re-authenticated", errSASL)
	}
	c.clientID = keptClientID(h.clientID)
	c.askRoom = false
	return api.handle(c, h, req)
}

// write sends one response frame within write_timeout. A Fetch answer
// goes out with one writev, its record batches not copied (fetchFrame).
func (c *conn) write(correlation int32, resp kmsg.Response) error {
	if fetch, ok := resp.(*kmsg.FetchResponse); ok {
		if bufs, ok := fetchFrame(c.wbuf[:0], correlation, fetch); ok {
			if err := c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.WriteTimeout)); err != nil {
				return err
			}
			if w, ok := c.nc.(buffersWriter); ok {
				_, err := w.WriteBuffers(&bufs) // internal/quietio: its deadlines
				return err
			}
			_, err := bufs.WriteTo(c.nc)
			return err
		}
	}
	c.wbuf = appendResponse(c.wbuf[:0], correlation, resp)
	ask := c.askRoom
	c.askRoom = false
	if len(c.wbuf) >= holdMin && c.principal != nil {
		if ask && !c.answerRoom() {
			c.s.refused.Refused("kafka "+kmsg.NameForKey(resp.Key()), errAnswersHeld.Error()+": connection closed", c.logFields(false)...)
			return errAnswersHeld
		}
		// Counted as held until written, as a Fetch's records are: the
		// admin reads ask AnswerRoom before building theirs (answerRoom),
		// a Metadata answer before sending it (askRoom).
		release := c.s.gate.HoldAnswer(c.principal.Claims, len(c.wbuf))
		defer release()
	}
	err := c.writeRaw(c.wbuf)
	if cap(c.wbuf) > 64<<10 {
		c.wbuf = nil // do not keep a large answer's buffer per idle connection
	}
	return err
}

// buffersWriter writes net.Buffers with writev under the deadline set
// last (internal/quietio.Conn).
type buffersWriter interface {
	WriteBuffers(*net.Buffers) (int64, error)
}

func (c *conn) writeRaw(b []byte) error {
	if err := c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.WriteTimeout)); err != nil {
		return err
	}
	_, err := c.nc.Write(b)
	return err
}

// loggedClientID is a client.id as a log line carries it: cut to
// keptClientIDMax bytes (a connection's is kept so already:
// keptClientID). Kafka allows 32,767, and one tenant joining at
// join_rate with such an id wrote ~1.6 MB of log a second (redteam19 #5).
func loggedClientID(id string) string {
	if len(id) <= keptClientIDMax {
		return id
	}
	return id[:keptClientIDMax] + "…"
}

// logFields names the connection without any token.

func (c *conn) logFields(reauth bool) []zap.Field {
	f := []zap.Field{zap.String("remote", c.nc.RemoteAddr().String()), zap.String("client_id", loggedClientID(c.clientID)), zap.String("mechanism", c.mechanism)}
	if p := c.principal; p != nil {
		f = append(f, zap.String("kind", string(p.Claims.Kind())), zap.String("subject", p.Claims.Subject), zap.String("jti", p.Claims.ID))
	}
	if reauth {
		f = append(f, zap.Bool("reauth", true))
	}
	return f
}
