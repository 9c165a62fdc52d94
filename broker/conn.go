package broker

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/capgate/capgate/internal/quietio"
)

// fetchConn is one fetch connection to one broker, spoken to on the
// goroutine that leased it: write the Fetch, read its answer, return.
//
// Why not kgo for this one request: kgo's Broker.Request queues every
// request for a writer goroutine it starts, reads the answer on a reader
// goroutine it starts and then wakes the caller — two goroutine starts and
// three cross-thread wake-ups per fetch, which the profile of the deployed
// gateway showed as its largest cost after the socket writes themselves
// (BENCHMARKS.md, "Where the gateway's CPU goes"). A leased connection
// carries one request at a time, so nothing needs a hand-off. franz-go
// still speaks the protocol: kmsg encodes and decodes every request and
// response, franz-go's sasl mechanisms authenticate, and kgo keeps doing
// everything else (metadata, ListOffsets, produce, commits).
//
// A fetchConn is used by one goroutine at a time (its lease); interrupt is
// the one method safe to call from another.
type fetchConn struct {
	nc      net.Conn
	br      *bufio.Reader
	spec    *connSpec
	corr    int32
	buf     []byte // request encoding, reused
	sizeBuf [4]byte

	fetchVersion int16     // the highest Fetch version both sides speak
	deadline     time.Time // the socket's deadline; zero: none
	reauthAt     time.Time // SASL session lifetime end, less a margin; zero: none
	idleSince    time.Time // when it went back to the pool
	interruptFn  func()    // interrupt, as a value made once

	// The Fetch request of the lease, filled in anew by each fetch (see
	// request): no allocation per fetch.
	req   kmsg.FetchRequest
	topic [1]kmsg.FetchRequestTopic
	part  [1]kmsg.FetchRequestTopicPartition
}

// request returns the connection's Fetch request, reset to kmsg's
// defaults with one topic of one partition, for the lease's fetch to fill
// in. It is the connection's until the next call.
func (c *fetchConn) request() *kmsg.FetchRequest {
	c.req, c.topic[0], c.part[0] = kmsg.NewFetchRequest(), kmsg.NewFetchRequestTopic(), kmsg.NewFetchRequestTopicPartition()
	c.topic[0].Partitions = c.part[:]
	c.req.Topics = c.topic[:]
	return &c.req
}

// connSpec is how every fetch connection is opened: the settings of
// commonOpts, for our own dialer.
type connSpec struct {
	timeout   time.Duration // dial, TLS, ApiVersions, SASL; and the answer beyond a fetch's MaxWait
	tls       *brokerTLS    // nil: plaintext
	sasl      sasl.Mechanism
	formatter *kmsg.RequestFormatter
	maxRead   int32 // largest response accepted
}

func newConnSpec(cfg Config, tlsc *brokerTLS) *connSpec {
	return &connSpec{
		tls:       tlsc,
		timeout:   cfg.RequestTimeout,
		sasl:      saslMechanism(cfg.SASL),
		formatter: kmsg.NewRequestFormatter(kmsg.FormatterClientID(cfg.ClientID)),
		maxRead:   cfg.MaxFetchBytes + 1<<20,
	}
}

// longAgo is a deadline in the past: it interrupts a blocked read or write.
var longAgo = time.Unix(1, 0)

// errTruncatedAnswer is an answer shorter than its own framing.
var errTruncatedAnswer = errors.New("broker answer shorter than its header")

// dial opens, secures and authenticates a connection to addr and learns
// the broker's Fetch version, all within spec.timeout and ctx.
func (s *connSpec) dial(ctx context.Context, addr string) (*fetchConn, error) {
	d := net.Dialer{Timeout: s.timeout}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	nc = quietio.Wrap(nc) // raw socket calls: no monitor-thread wake per fetch (internal/quietio)
	if s.tls != nil {
		nc = tls.Client(nc, s.tls.config(addr)) // the CA file as last read (brokerTLS)
	}
	c := &fetchConn{nc: nc, br: bufio.NewReaderSize(nc, 4<<10), spec: s}
	c.interruptFn = c.interrupt
	if err := c.open(ctx, addr); err != nil {
		_ = nc.Close()
		return nil, err
	}
	return c, nil
}

// open runs the handshake of a new connection: TLS (if any),
// ApiVersions, then SASL (if any).
func (c *fetchConn) open(ctx context.Context, addr string) error {
	_ = c.nc.SetDeadline(time.Now().Add(c.spec.timeout))
	stop := context.AfterFunc(ctx, c.interrupt)
	defer stop()
	if tc, ok := c.nc.(*tls.Conn); ok {
		if err := tc.HandshakeContext(ctx); err != nil {
			return err
		}
	}
	versions, err := c.apiVersions()
	if err != nil {
		return fmt.Errorf("api versions: %w", err)
	}
	v, ok := versions[kmsg.Fetch.Int16()]
	if !ok || v < 4 {
		return errors.New("broker does not serve Fetch v4 or later")
	}
	c.fetchVersion = min(v, kmsg.NewPtrFetchRequest().MaxVersion())
	if c.spec.sasl != nil {
		if err := c.authenticate(ctx, addr, versions); err != nil {
			return fmt.Errorf("sasl %s: %w", c.spec.sasl.Name(), err)
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return c.nc.SetDeadline(time.Time{})
}

// apiVersions asks the broker which versions it serves (v3, falling back
// to v0 for brokers before 2.4) and returns each key's maximum.
func (c *fetchConn) apiVersions() (map[int16]int16, error) {
	for _, version := range []int16{3, 0} {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = version
		req.ClientSoftwareName, req.ClientSoftwareVersion = "capgate", "1"
		resp := kmsg.NewPtrApiVersionsResponse()
		_, err := c.roundTrip(req, resp)
		if err != nil {
			return nil, err
		}
		if resp.ErrorCode == kerr.UnsupportedVersion.Code && version > 0 && len(resp.ApiKeys) == 0 {
			continue // an old broker answers v0 and lists nothing: ask v0
		}
		if resp.ErrorCode != 0 && resp.ErrorCode != kerr.UnsupportedVersion.Code {
			return nil, kerr.ErrorForCode(resp.ErrorCode)
		}
		max := make(map[int16]int16, len(resp.ApiKeys))
		for _, k := range resp.ApiKeys {
			max[k.ApiKey] = k.MaxVersion
		}
		return max, nil
	}
	return nil, errors.New("broker answered no api versions")
}

// authenticate runs SaslHandshake v1 and SaslAuthenticate rounds with the
// configured mechanism (KIP-152). A broker lifetime (KIP-368) makes the
// pool replace the connection before it runs out.
func (c *fetchConn) authenticate(ctx context.Context, addr string, versions map[int16]int16) error {
	mech := c.spec.sasl
	if versions[kmsg.SASLHandshake.Int16()] < 1 {
		return errors.New("broker does not serve SaslHandshake v1")
	}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, mech.Name()
	hsResp := kmsg.NewPtrSASLHandshakeResponse()
	if _, err := c.roundTrip(hs, hsResp); err != nil {
		return err
	}
	if err := kerr.ErrorForCode(hsResp.ErrorCode); err != nil {
		return err
	}
	session, clientWrite, err := mech.Authenticate(ctx, addr)
	if err != nil {
		return err
	}
	started := time.Now()
	var lifetime int64
	for done := false; !done || len(clientWrite) > 0; {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version = min(versions[kmsg.SASLAuthenticate.Int16()], req.MaxVersion())
		req.SASLAuthBytes = clientWrite
		resp := kmsg.NewPtrSASLAuthenticateResponse()
		if _, err := c.roundTrip(req, resp); err != nil {
			return err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			if resp.ErrorMessage != nil {
				return fmt.Errorf("%w: %s", err, *resp.ErrorMessage)
			}
			return err
		}
		lifetime = resp.SessionLifetimeMillis
		clientWrite = nil
		if !done {
			if done, clientWrite, err = session.Challenge(resp.SASLAuthBytes); err != nil {
				return err
			}
		}
	}
	if lifetime > 0 {
		// Replace the connection at 90% of its lifetime, and at least a
		// second early: a broker closes it once the lifetime is over.
		life := time.Duration(min(lifetime, int64(365*24*time.Hour/time.Millisecond))) * time.Millisecond
		c.reauthAt = started.Add(min(life*9/10, life-time.Second))
	}
	return nil
}

// interrupt makes the blocked read or write of the connection return at
// once; the connection is unusable afterwards (its exchange is cut).
func (c *fetchConn) interrupt() { _ = c.nc.SetDeadline(longAgo) }

// close closes the socket.
func (c *fetchConn) close() { _ = c.nc.Close() }

// expired reports a connection to replace rather than use at now.
func (c *fetchConn) expired(now time.Time, idleTimeout time.Duration) bool {
	return (!c.reauthAt.IsZero() && !now.Before(c.reauthAt)) || now.Sub(c.idleSince) > idleTimeout
}

// fetch sends req and reads its answer until deadline (or up to slack
// later), or until ctx ends: then it returns at once with an error that
// errors.Is ctx.Err(), and the connection must be closed — also when the
// answer was read before the cancellation's interrupt ran. Any error
// leaves the connection unusable. The answer aliases frame, a buffer for
// putFrame once it is not needed.
//
// The deadline is a bound, not a schedule: the socket's deadline is set
// slack beyond the one asked for and moves only when it falls short of
// it or lies more than slack beyond, as moving it costs two runtime
// timer updates, and fetches one after another on a connection ask for
// deadlines a few microseconds apart.
func (c *fetchConn) fetch(ctx context.Context, req *kmsg.FetchRequest, deadline time.Time, slack time.Duration) (resp *kmsg.FetchResponse, frame *[]byte, err error) {
	req.Version = c.fetchVersion
	for i := range req.Topics {
		if req.Topics[i].TopicID == ([16]byte{}) {
			req.Version = min(req.Version, 12) // no topic id known: name it
		}
	}
	if off := c.deadline.Sub(deadline); off < 0 || off > slack {
		if err := c.nc.SetDeadline(deadline.Add(slack)); err != nil {
			return nil, nil, err
		}
		c.deadline = deadline.Add(slack)
	}
	stop := afterFunc(ctx, c.interruptFn)
	resp = kmsg.NewPtrFetchResponse()
	frame, err = c.roundTrip(req, resp)
	if !stop() {
		// The interrupt ran, or runs now, even if the answer was read
		// first: it put a past deadline on the socket, which c.deadline
		// does not know, so the connection must not be reused (the next
		// fetch on it failed at once with REQUEST_TIMED_OUT). The fetch
		// was cancelled either way: it answers so.
		putFrame(frame)
		return nil, nil, fmt.Errorf("fetch interrupted: %w", context.Cause(ctx))
	}
	if err == nil {
		return resp, frame, nil
	}
	putFrame(frame)
	if isTimeout(err) {
		return nil, nil, fmt.Errorf("no answer by the deadline: %w", kerr.RequestTimedOut)
	}
	return nil, nil, err
}

// isTimeout reports a socket deadline that passed. (Only on errors: the
// net.Error errors.As fills in escapes, an allocation per call.)
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// afterFunc is context.AfterFunc, or ctx's own AfterFunc when it has one
// (the gateway's fetch contexts: they run f on the cancelling goroutine
// and spare the afterFuncCtx and Done channel context.AfterFunc costs).
// f must not block.
func afterFunc(ctx context.Context, f func()) (stop func() bool) {
	if a, ok := ctx.(interface{ AfterFunc(func()) func() bool }); ok {
		return a.AfterFunc(f)
	}
	return context.AfterFunc(ctx, f)
}

// roundTrip writes req and reads its answer into resp: one request at a
// time, so the answer is the next frame on the connection. resp aliases
// frame (nil when nothing was read).
func (c *fetchConn) roundTrip(req kmsg.Request, resp kmsg.Response) (frame *[]byte, err error) {
	c.corr++
	c.buf = c.spec.formatter.AppendRequest(c.buf[:0], req, c.corr)
	if _, err := c.nc.Write(c.buf); err != nil {
		return nil, err
	}
	if frame, err = c.readFrame(); err != nil {
		return frame, err
	}
	return frame, c.decodeAnswer(req, resp, *frame)
}

// decodeAnswer checks the answer's header and decodes its body into resp.
func (c *fetchConn) decodeAnswer(req kmsg.Request, resp kmsg.Response, body []byte) (err error) {
	if len(body) < 4 {
		return errTruncatedAnswer
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != c.corr {
		return fmt.Errorf("answer to request %d while waiting for %d", got, c.corr)
	}
	body = body[4:]
	resp.SetVersion(req.GetVersion())
	// Flexible answers carry tagged fields in their header, except
	// ApiVersions, whose header stays v0 so any client can read it.
	if resp.IsFlexible() && req.Key() != kmsg.ApiVersions.Int16() {
		if body, err = skipTags(body); err != nil {
			return err
		}
	}
	if u, ok := resp.(interface{ UnsafeReadFrom([]byte) error }); ok {
		// Strings alias body, which the answer keeps alive anyway.
		return u.UnsafeReadFrom(body)
	}
	return resp.ReadFrom(body)
}

// readFrame reads one length-prefixed answer into a buffer of getFrame.
func (c *fetchConn) readFrame() (*[]byte, error) {
	if _, err := io.ReadFull(c.br, c.sizeBuf[:]); err != nil {
		return nil, err
	}
	size := int32(binary.BigEndian.Uint32(c.sizeBuf[:]))
	if size < 0 || size > c.spec.maxRead {
		return nil, fmt.Errorf("broker answer of %d bytes, limit %d (plaintext to a TLS port?)", size, c.spec.maxRead)
	}
	frame := getFrame(int(size))
	if _, err := io.ReadFull(c.br, *frame); err != nil {
		return frame, err
	}
	return frame, nil
}

// skipTags skips the tagged fields of a flexible response header.
func skipTags(b []byte) ([]byte, error) {
	n, used := binary.Uvarint(b)
	if used <= 0 {
		return nil, errTruncatedAnswer
	}
	b = b[used:]
	for range n {
		if _, used = binary.Uvarint(b); used <= 0 {
			return nil, errTruncatedAnswer
		}
		b = b[used:]
		size, used := binary.Uvarint(b)
		if used <= 0 || uint64(len(b)-used) < size {
			return nil, errTruncatedAnswer
		}
		b = b[used+int(size):]
	}
	return b, nil
}
