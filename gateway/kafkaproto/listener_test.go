package kafkaproto

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/broker"
	"github.com/capgate/capgate/gateway/authz"
	"github.com/capgate/capgate/internal/refusallog"
	"github.com/capgate/capgate/ocap"
)

// The tests here run the listener alone on a loopback socket: a Gate
// that refuses everything and an Authenticator of the test's choosing
// stand in for the gateway. What needs a broker or a coordinator is in
// e2e/kafkaclients.

// refuseGate refuses every partition; nothing here reaches it.
type refuseGate struct{}

func (refuseGate) VerifyCapability([]byte, netip.Addr, time.Time) (*ocap.Claims, error) {
	return nil, errors.New("no capabilities here")
}
func (refuseGate) VerifyClient(string, netip.Addr, time.Time) (*ocap.Claims, error) {
	return nil, errors.New("no credentials here")
}
func (refuseGate) CheckClient(*ocap.Claims, time.Time) api.Code { return api.CodeForbidden }
func (refuseGate) Admit(*ocap.Claims, authz.Request, time.Time) (api.Code, int64, time.Duration) {
	return api.CodeForbidden, 0, 0
}
func (refuseGate) Recheck(*ocap.Claims, authz.Request, time.Time) api.Code { return api.CodeForbidden }
func (refuseGate) AdmitRate(*ocap.Claims, time.Time) time.Duration         { return 0 }
func (refuseGate) Track(base context.Context, _ *ocap.Claims, _ authz.Request, _ bool) (context.Context, func(), api.Code) {
	return base, func() {}, ""
}
func (refuseGate) Hold(*ocap.Claims, int) (func(), api.Code)              { return func() {}, "" }
func (refuseGate) HoldAnswer(*ocap.Claims, int) func()                    { return func() {} }
func (refuseGate) AnswerRoom(*ocap.Claims) api.Code                       { return "" }
func (refuseGate) Observe(*ocap.Claims, string, api.Code, int, time.Time) {}
func (refuseGate) Broker() *broker.Client                                 { return nil }

// testConfig is a valid listener configuration on a free loopback port.
func testConfig() Config {
	return Config{
		Listen: "127.0.0.1:0", FetchLanes: 1, CoordinatorURL: "http://127.0.0.1:1",
		HeartbeatInterval: 50 * time.Millisecond, SessionTimeoutMin: time.Second, SessionTimeoutMax: time.Minute,
		MemberSessionTimeout: 10 * time.Second, RequestTimeout: 5 * time.Second,
		MaxRequestBytes: 1 << 20, MaxRequestPartitions: DefaultMaxRequestPartitions, AuthTimeout: 5 * time.Second, ReadTimeout: 5 * time.Second,
		WriteTimeout: 5 * time.Second, IdleTimeout: time.Minute, MaxConnections: 16, MaxMembers: 16, CoordinatorConnectionsMax: 64, ReauthMax: 10 * time.Minute,
		MaxWait: time.Second, MaxFetchBytes: 1 << 20,
	}
}

// startListener starts a listener with cfg and auth, logging to log.
func startListener(t *testing.T, cfg Config, auth Authenticator, log *zap.Logger) *Server {
	t.Helper()
	s, err := New(cfg, refuseGate{}, auth, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// apiVersions sends an ApiVersions v0 on nc and reads its answer.
func apiVersions(t *testing.T, nc net.Conn) error {
	t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(0)
	if _, err := nc.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, 1)); err != nil {
		return err
	}
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := readResponse(nc)
	return err
}

// readResponse reads one response frame's body.
func readResponse(nc net.Conn) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(nc, size[:]); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err := io.ReadFull(nc, body)
	return body, err
}

// TestRefusedConnectionsDoNotFloodTheLog: past kafka_max_connections,
// all of them authenticated, a new connection gets the handshake reserve
// (one place here) and the next closes it for its own — a flood of them
// logs what refusallog allows (a burst, then one line a second, the rest
// counted as suppressed), not a line each.
func TestRefusedConnectionsDoNotFloodTheLog(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	table, tokens := mintCapabilities(t, 1)
	cfg := testConfig()
	cfg.MaxConnections = 1
	s := startListener(t, cfg, table, zap.New(core))
	held := dialAuthenticated(t, s, tokens[0]) // the one slot, never given up
	const flood = 100
	start := time.Now()
	var last net.Conn
	for range flood {
		nc, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		if err := apiVersions(t, nc); err != nil { // answered: in the reserve
			t.Fatal(err)
		}
		if last != nil {
			last.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := last.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("the reserve's connection when another came: read %v, want it closed", err)
			}
			last.Close()
		}
		last = nc
	}
	last.Close()
	allowed := refusallog.Burst + refusallog.PerSecond*(int(time.Since(start).Seconds())+1)
	if n := logs.FilterMessageSnippet("kafka connection refused").Len(); n == 0 || n > allowed {
		t.Fatalf("%d connections refused: %d log lines, want 1..%d", flood, n, allowed)
	}
	if _, err := held.roundTrip(kmsg.NewPtrApiVersionsRequest()); err != nil {
		t.Fatalf("the connection held throughout: %v", err)
	}
}

// tokenTable authenticates the tokens it lists, each as its claims.
type tokenTable map[string]*ocap.Claims

func (tt tokenTable) Authenticate(token string, _ netip.Addr, now time.Time) (*Principal, error) {
	c, ok := tt[token]
	if !ok {
		return nil, ocap.ErrBadType
	}
	return &Principal{Claims: c, Token: token, Expires: now.Add(time.Hour)}, nil
}

// mintCapabilities mints a capability for each orders partition and
// lists them in a tokenTable (the listener's view of verified tokens).
func mintCapabilities(t *testing.T, partitions ...int32) (tokenTable, []string) {
	t.Helper()
	now := time.Now()
	m := testMinter(t, now)
	table := tokenTable{}
	var tokens []string
	for _, p := range partitions {
		token, claims, err := m.Mint(ocap.KindCapability, ocap.Claims{Subject: "holder", Topic: "orders", Partition: &p, Ops: ocap.Ops(ocap.OpFetch)}, now, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		table[token] = claims
		tokens = append(tokens, token)
	}
	return table, tokens
}

// testMinter mints tokens of issuer and audience "test".
func testMinter(t *testing.T, now time.Time) *ocap.Minter {
	t.Helper()
	ring, err := ocap.NewKeyRing(rand.Reader, now)
	if err != nil {
		t.Fatal(err)
	}
	m, err := ocap.NewMinter(ocap.VerifierConfig{Issuer: "test", Audience: "test", MaxLease: time.Hour}, ring, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// saslExchange runs SaslHandshake v1 (PLAIN) and SaslAuthenticate with
// token: the answer, or the connection's error.
func saslExchange(r *testConn, token string) (*kmsg.SASLAuthenticateResponse, error) {
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = "PLAIN"
	resp, err := r.roundTrip(hs)
	if err != nil {
		return nil, err
	}
	if code := resp.(*kmsg.SASLHandshakeResponse).ErrorCode; code != 0 {
		return nil, fmt.Errorf("handshake: error %d", code)
	}
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.SetVersion(2)
	auth.SASLAuthBytes = []byte("\x00user\x00" + token)
	if resp, err = r.roundTrip(auth); err != nil {
		return nil, err
	}
	return resp.(*kmsg.SASLAuthenticateResponse), nil
}

// saslV1 is saslExchange's SASL error; a connection error fails t.
func saslV1(t *testing.T, r *testConn, token string) int16 {
	t.Helper()
	resp, err := saslExchange(r, token)
	if err != nil {
		t.Fatal(err)
	}
	return resp.ErrorCode
}

// dialAuthenticated connects to s and authenticates with token.
func dialAuthenticated(t *testing.T, s *Server, token string) *testConn {
	t.Helper()
	nc, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	r := &testConn{t: t, nc: nc}
	if code := saslV1(t, r, token); code != 0 {
		t.Fatalf("authenticate: %d", code)
	}
	return r
}

// TestReauthenticationKeepsTheIdentity: a connection re-authenticates
// (KIP-368) only as the identity it authenticated as — also through a
// SaslHandshake v0 and its raw token frame, the older way to send it.
// Another partition's capability closes the connection unanswered.
func TestReauthenticationKeepsTheIdentity(t *testing.T) {
	table, tokens := mintCapabilities(t, 1, 1, 2)
	s := startListener(t, testConfig(), table, nil)
	for _, tc := range []struct {
		name  string
		token string
		same  bool
	}{{"a renewed capability of the same partition", tokens[1], true}, {"another partition's capability", tokens[2], false}} {
		r := dialAuthenticated(t, s, tokens[0])
		nc := r.nc
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.SetVersion(0)
		hs.Mechanism = "PLAIN"
		if resp, err := r.roundTrip(hs); err != nil || resp.(*kmsg.SASLHandshakeResponse).ErrorCode != 0 {
			t.Fatalf("re-authentication handshake v0: %v %+v", err, resp)
		}
		raw := []byte("\x00user\x00" + tc.token)
		nc.Write(binary.BigEndian.AppendUint32(nil, uint32(len(raw))))
		nc.Write(raw)
		nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		answer, err := readResponse(nc) // v0 success: an empty frame
		switch {
		case tc.same && (err != nil || len(answer) != 0):
			t.Fatalf("%s through v0: %v, %d bytes; want re-authenticated (an empty frame)", tc.name, err, len(answer))
		case !tc.same && err == nil:
			t.Fatalf("%s through v0: answered %d bytes; want the connection closed", tc.name, len(answer))
		}
		if tc.same {
			if _, err := r.roundTrip(kmsg.NewPtrApiVersionsRequest()); err != nil {
				t.Fatalf("after re-authenticating: %v", err)
			}
		}
	}
}

// readSizes wraps a listener's connections to report the size of every
// buffer the server reads into.
type readSizes struct {
	net.Listener
	sizes chan int
}

func (l readSizes) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	return sizedConn{nc, l.sizes}, err
}

type sizedConn struct {
	net.Conn
	sizes chan int
}

func (c sizedConn) Read(p []byte) (int, error) {
	select {
	case c.sizes <- len(p):
	default:
	}
	return c.Conn.Read(p)
}

// TestAnnouncedFrameSizeCostsNothing: the size a request frame announces
// is not memory the listener sets aside — a client that announces the
// largest frame allowed and sends nothing more (on every connection it
// may open) makes the listener read into a buffer of what a request
// usually is, grown only as the bytes arrive.
func TestAnnouncedFrameSizeCostsNothing(t *testing.T) {
	table, tokens := mintCapabilities(t, 1)
	sizes := make(chan int, 1024)
	cfg := testConfig()
	cfg.MaxRequestBytes = 8 << 20
	cfg.WrapListener = func(ln net.Listener) net.Listener { return readSizes{ln, sizes} }
	s := startListener(t, cfg, table, nil)
	nc := dialAuthenticated(t, s, tokens[0]).nc
	for len(sizes) > 0 {
		<-sizes
	}
	nc.Write(binary.BigEndian.AppendUint32(nil, 8<<20)) // 8 MiB announced, nothing sent
	got := <-sizes
	for got == 4 { // the size prefix's read
		got = <-sizes
	}
	if got > frameChunk {
		t.Fatalf("an 8 MiB frame announced, none of it sent: the listener reads into a %d-byte buffer, want at most %d", got, frameChunk)
	}
	// A frame larger than a chunk is still read whole as it arrives.
	r := dialAuthenticated(t, s, tokens[0])
	big := kmsg.NewPtrApiVersionsRequest() // 5 chunks
	big.ClientSoftwareName = strings.Repeat("x", 5*frameChunk)
	if _, err := r.roundTrip(big); err != nil {
		t.Fatalf("an ApiVersions request of %d bytes: %v", len(big.ClientSoftwareName), err)
	}
}

// TestSilentConnectionsDoNotLockClientsOut: an attacker without any
// token who holds every one of kafka_max_connections open, sending
// nothing, does not lock clients out for auth_timeout: a new connection
// takes the place of the oldest that has not authenticated, so a client
// that authenticates at once gets in. Authenticated connections are
// never given up for one of the tenant holding the most: with all of
// them authenticated and of one tenant, the next gets the handshake
// reserve and its authentication as that tenant is refused.
func TestSilentConnectionsDoNotLockClientsOut(t *testing.T) {
	table, tokens := mintCapabilities(t, 1)
	cfg := testConfig()
	cfg.MaxConnections = 4
	s := startListener(t, cfg, table, nil)
	var silent []net.Conn
	for range cfg.MaxConnections {
		nc, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		if err := apiVersions(t, nc); err != nil { // answered: it holds a slot
			t.Fatal(err)
		}
		silent = append(silent, nc)
	}
	clients := []*testConn{dialAuthenticated(t, s, tokens[0])} // in, in place of the oldest silent one
	silent[0].SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := silent[0].Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the oldest silent connection: read %v, want it closed for the client", err)
	}
	for _, nc := range silent[1:] {
		if err := apiVersions(t, nc); err != nil {
			t.Fatalf("a younger silent connection: %v, want it still open", err)
		}
	}
	for len(clients) < cfg.MaxConnections {
		clients = append(clients, dialAuthenticated(t, s, tokens[0]))
	}
	nc, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if resp, err := saslExchange(&testConn{t: t, nc: nc}, tokens[0]); err != nil || resp.ErrorCode == 0 ||
		resp.ErrorMessage == nil || !strings.Contains(*resp.ErrorMessage, "kafka_max_connections") {
		t.Fatalf("a connection past kafka_max_connections all authenticated by its tenant: %+v %v, want SASL refused naming kafka_max_connections", resp, err)
	}
	for _, r := range clients {
		if _, err := r.roundTrip(kmsg.NewPtrApiVersionsRequest()); err != nil {
			t.Fatalf("an authenticated connection: %v, want it kept", err)
		}
	}
}

// unsyncedGate is a gateway before its first sync: no token verifies
// yet, and CheckClient answers not_ready whatever the claims.
type unsyncedGate struct{ refuseGate }

func (unsyncedGate) VerifyCapability([]byte, netip.Addr, time.Time) (*ocap.Claims, error) {
	return nil, errors.New("gateway: not ready: the coordinator's settings have not arrived")
}
func (unsyncedGate) CheckClient(*ocap.Claims, time.Time) api.Code { return api.CodeNotReady }

// TestUnsyncedGatewayDoesNotFailAuthentication: a gateway that cannot
// yet verify tokens (before its first sync: just restarted, the
// coordinator slow) closes a SASL exchange without an answer — a
// connection error, which every client retries — instead of answering
// SASL_AUTHENTICATION_FAILED, which Java and KafkaJS clients take as
// final and which tells a client its good token is bad.
func TestUnsyncedGatewayDoesNotFailAuthentication(t *testing.T) {
	s, err := New(testConfig(), unsyncedGate{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	nc, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if resp, err := saslExchange(&testConn{t: t, nc: nc}, "a.good.token"); err == nil {
		t.Fatalf("SaslAuthenticate before the gateway's first sync: answered error %d (%v), want the connection closed unanswered",
			resp.ErrorCode, *resp.ErrorMessage)
	}
}
