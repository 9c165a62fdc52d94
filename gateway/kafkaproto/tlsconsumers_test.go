package kafkaproto

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/ocap"
	"github.com/capgate/capgate/tlsconf"
)

// acceptToken authenticates exactly one token, as a capability.
type acceptToken string

func (a acceptToken) Authenticate(token string, _ netip.Addr, now time.Time) (*Principal, error) {
	if token != string(a) {
		return nil, ocap.ErrBadType
	}
	claims := &ocap.Claims{Subject: "holder", Topic: "orders", ExpiresAt: ocap.Seconds(now.Add(time.Hour).Unix())}
	return &Principal{Claims: claims, Token: token, Expires: now.Add(time.Hour)}, nil
}

// TestKafkaListenerNeedsConsumerCertificate: with gateway.tls.consumers
// at token+certificate, a stolen token alone gets nowhere on the Kafka
// listener either — no certificate, one of another name or one of
// another CA is refused at SASL (SASL_AUTHENTICATION_FAILED, the
// connection closed) though the token is good; an allowed certificate
// with the token authenticates.
func TestKafkaListenerNeedsConsumerCertificate(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	ca, err := tlsconf.NewCA("test CA", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	other, err := tlsconf.NewCA("other CA", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	issue := func(ca *tlsconf.CA, name string) tls.Certificate {
		leaf, err := ca.Issue(name, []string{"127.0.0.1"}, now, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		c, err := leaf.TLS()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	server, err := ca.Issue("gateway", []string{"127.0.0.1"}, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := server.Write(dir, "gateway")
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.pem")
	if err := tlsconf.WriteFile(caFile, ca.PEM); err != nil {
		t.Fatal(err)
	}
	srvTLS, err := tlsconf.NewServer(tlsconf.ServerConfig{CertFile: certFile, KeyFile: keyFile, ClientCAFile: caFile,
		ClientAuth: tlsconf.ClientAuthIfGiven, ReloadInterval: time.Hour}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.WrapListener = srvTLS.Listener
	cfg.Consumers = tlsconf.Channel{Auth: tlsconf.AuthTokenAndCertificate, ClientNames: []string{"svc-*"}}
	s := startListener(t, cfg, acceptToken("good"), nil)

	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	// authenticate dials with certs and authenticates with the good
	// token: the SASL error, -1 when TLS refused the connection first.
	authenticate := func(certs ...tls.Certificate) (*testConn, int16) {
		cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		if len(certs) > 0 { // sent whatever CA the server names
			cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &certs[0], nil }
		}
		nc, err := tls.Dial("tcp", s.Addr(), cfg)
		if err != nil {
			return nil, -1
		}
		t.Cleanup(func() { nc.Close() })
		r := &testConn{t: t, nc: nc}
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.SetVersion(1)
		hs.Mechanism = "PLAIN"
		resp, err := r.roundTrip(hs)
		if err != nil {
			return nil, -1 // TLS 1.3: the server's verdict on the certificate arrives with the first read
		}
		if code := resp.(*kmsg.SASLHandshakeResponse).ErrorCode; code != 0 {
			t.Fatalf("handshake: %d", code)
		}
		auth := kmsg.NewPtrSASLAuthenticateRequest()
		auth.SetVersion(2)
		auth.SASLAuthBytes = []byte("\x00capgate\x00good")
		resp, err = r.roundTrip(auth)
		if err != nil {
			t.Fatal(err)
		}
		return r, resp.(*kmsg.SASLAuthenticateResponse).ErrorCode
	}
	for name, certs := range map[string][]tls.Certificate{
		"no certificate":          nil,
		"a name not allowed":      {issue(ca, "intruder")},
		"another CA's, same name": {issue(other, "svc-1")},
	} {
		r, code := authenticate(certs...)
		if code == -1 {
			continue // refused by the handshake: fine
		}
		if code != kerr.SaslAuthenticationFailed.Code || !r.closed() {
			t.Errorf("%s with a good token: SASL error %d; want SASL_AUTHENTICATION_FAILED and the connection closed", name, code)
		}
	}
	r, code := authenticate(issue(ca, "svc-1"))
	if code != 0 {
		t.Fatalf("an allowed certificate with a good token: SASL error %d; want authenticated", code)
	}
	if _, err := r.roundTrip(kmsg.NewPtrApiVersionsRequest()); err != nil {
		t.Fatalf("after authenticating with an allowed certificate: %v", err)
	}
}

// testConn is a hand-driven Kafka client connection.
type testConn struct {
	t    *testing.T
	nc   net.Conn
	corr int32
}

func (r *testConn) roundTrip(req kmsg.Request) (kmsg.Response, error) {
	if err := r.send(req); err != nil {
		return nil, err
	}
	return r.receive(req)
}

// send writes req without waiting for its answer.
func (r *testConn) send(req kmsg.Request) error {
	r.corr++
	_, err := r.nc.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, r.corr))
	return err
}

// receive reads the next answer (within 5 s) as req's.
func (r *testConn) receive(req kmsg.Request) (kmsg.Response, error) {
	r.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	body, err := readResponse(r.nc)
	if err != nil {
		return nil, err
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	b := body[4:] // correlation id
	if resp.IsFlexible() && resp.Key() != int16(kmsg.ApiVersions) {
		b = b[1:] // no tagged fields in our answers' headers
	}
	return resp, resp.ReadFrom(b)
}

// closed reports whether the server closed the connection (within 5 s).
func (r *testConn) closed() bool {
	r.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := r.nc.Read(make([]byte, 1))
	return err != nil && !isTimeout(err)
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
