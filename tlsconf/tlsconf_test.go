package tlsconf_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/tlsconf"
)

type pki struct {
	ca   *tlsconf.CA
	dir  string
	pool *x509.CertPool
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	ca, err := tlsconf.NewCA("test-ca", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return &pki{ca: ca, dir: t.TempDir(), pool: pool}
}

func (p *pki) issue(t *testing.T, name string) tlsconf.Leaf {
	t.Helper()
	l, err := p.ca.Issue(name, []string{"127.0.0.1", "localhost"}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func (p *pki) write(t *testing.T, l tlsconf.Leaf, name string) (string, string) {
	t.Helper()
	c, k, err := l.Write(p.dir, name)
	if err != nil {
		t.Fatal(err)
	}
	return c, k
}

func (p *pki) caFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(p.dir, "ca.crt")
	if err := tlsconf.WriteFile(path, p.ca.PEM); err != nil {
		t.Fatal(err)
	}
	return path
}

// serve runs a TLS echo of the peer's verified name on a loopback
// listener: each connection answers one line, the client's CN or "-".
func serve(t *testing.T, s *tlsconf.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tl := s.Listener(ln)
	var wg sync.WaitGroup
	t.Cleanup(func() { tl.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := tl.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				tc := c.(*tls.Conn)
				if tc.Handshake() != nil {
					return
				}
				cs := tc.ConnectionState()
				name := tlsconf.PeerName(&cs)
				if name == "" {
					name = "-"
				}
				io.WriteString(c, name+"\n")
			}()
		}
	}()
	return ln.Addr().String()
}

// dial handshakes with cfg and returns the server's leaf and the line
// the server wrote.
func dial(addr string, cfg *tls.Config) (*x509.Certificate, string, error) {
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return nil, "", err
	}
	defer c.Close()
	b, err := io.ReadAll(c)
	if err != nil {
		return nil, "", err
	}
	return c.ConnectionState().PeerCertificates[0], strings.TrimSpace(string(b)), nil
}

func serverConfig(cert, key, ca string) tlsconf.ServerConfig {
	cfg := tlsconf.DefaultServerConfig()
	cfg.CertFile, cfg.KeyFile, cfg.ClientCAFile = cert, key, ca
	return cfg
}

func TestServerServesAndReloadsWholePairsOnly(t *testing.T) {
	p := newPKI(t)
	first := p.issue(t, "server-1")
	cert, key := p.write(t, first, "server")
	s, err := tlsconf.NewServer(serverConfig(cert, key, ""), nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	var mu sync.Mutex
	tlsconf.SetClock(s, func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	advance := func() { mu.Lock(); now = now.Add(tlsconf.DefaultReloadInterval); mu.Unlock() }
	addr := serve(t, s)
	client := &tls.Config{RootCAs: p.pool}
	serialOf := func() string {
		t.Helper()
		leaf, _, err := dial(addr, client)
		if err != nil {
			t.Fatal(err)
		}
		return leaf.SerialNumber.String()
	}
	if got := serialOf(); got != first.Cert.SerialNumber.String() {
		t.Fatalf("serving %s, want the first certificate", got)
	}

	// Half a swap: the new certificate beside the old key is refused,
	// the old pair keeps serving.
	second := p.issue(t, "server-2")
	if err := tlsconf.WriteFile(cert, second.CertPEM); err != nil {
		t.Fatal(err)
	}
	advance()
	if got := serialOf(); got != first.Cert.SerialNumber.String() {
		t.Fatalf("after a half swap serving %s, want the first certificate still", got)
	}
	if changed, err := s.Reload(); changed || err == nil {
		t.Fatalf("Reload of a mismatched pair = %v, %v; want refused", changed, err)
	}
	// Garbage is refused the same way.
	if err := tlsconf.WriteFile(key, []byte("-----BEGIN PRIVATE KEY-----\nnot a key\n")); err != nil {
		t.Fatal(err)
	}
	advance()
	if got := serialOf(); got != first.Cert.SerialNumber.String() {
		t.Fatalf("after garbage serving %s, want the first certificate still", got)
	}
	// The key arrives: the next handshake after the interval serves the
	// new pair, without a restart.
	if err := tlsconf.WriteFile(key, second.KeyPEM); err != nil {
		t.Fatal(err)
	}
	if got := serialOf(); got != first.Cert.SerialNumber.String() {
		t.Fatalf("before the reload interval passed serving %s, want the first certificate", got)
	}
	advance()
	if got := serialOf(); got != second.Cert.SerialNumber.String() {
		t.Fatalf("after the swap serving %s, want the second certificate", got)
	}
}

func TestServerRefusesOldProtocolsAndWeakSuites(t *testing.T) {
	p := newPKI(t)
	cert, key := p.write(t, p.issue(t, "server"), "server")
	s, err := tlsconf.NewServer(serverConfig(cert, key, ""), nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, s)
	for name, cfg := range map[string]*tls.Config{
		"tls1.1":    {RootCAs: p.pool, MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11},
		"cbc suite": {RootCAs: p.pool, MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA}},
		"wrong ca":  {RootCAs: x509.NewCertPool()},
	} {
		if _, _, err := dial(addr, cfg); err == nil {
			t.Errorf("%s: handshake succeeded, want refused", name)
		}
	}
	for name, cfg := range map[string]*tls.Config{
		"tls1.2": {RootCAs: p.pool, MaxVersion: tls.VersionTLS12},
		"tls1.3": {RootCAs: p.pool, MinVersion: tls.VersionTLS13},
	} {
		if _, _, err := dial(addr, cfg); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestClientCertificates(t *testing.T) {
	p := newPKI(t)
	cert, key := p.write(t, p.issue(t, "server"), "server")
	ca := p.caFile(t)
	gwCert, gwKey := p.write(t, p.issue(t, "gateway-7"), "gateway")
	other, err := tlsconf.NewCA("other-ca", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	strangerLeaf, err := other.Issue("gateway-9", nil, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	strCert, strKey := p.write(t, strangerLeaf, "stranger")

	optional, err := tlsconf.NewServer(serverConfig(cert, key, ca), nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, optional)
	client := func(c, k string) *tls.Config {
		cfg, err := tlsconf.ClientConfig{CAFile: ca, CertFile: c, KeyFile: k}.TLS(nil)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	if _, name, err := dial(addr, client("", "")); err != nil || name != "-" {
		t.Fatalf("no certificate on verify_if_given: %q, %v; want served without a peer name", name, err)
	}
	if _, name, err := dial(addr, client(gwCert, gwKey)); err != nil || name != "gateway-7" {
		t.Fatalf("gateway certificate: %q, %v", name, err)
	}
	if _, _, err := dial(addr, client(strCert, strKey)); err == nil {
		t.Fatal("a certificate of another CA was accepted")
	}

	required := serverConfig(cert, key, ca)
	required.ClientAuth = tlsconf.ClientAuthRequire
	req, err := tlsconf.NewServer(required, nil)
	if err != nil {
		t.Fatal(err)
	}
	raddr := serve(t, req)
	if _, _, err := dial(raddr, client("", "")); err == nil {
		t.Fatal("require: a client without a certificate completed the exchange")
	}
	if _, name, err := dial(raddr, client(gwCert, gwKey)); err != nil || name != "gateway-7" {
		t.Fatalf("require with a certificate: %q, %v", name, err)
	}
}

func TestChannelAllows(t *testing.T) {
	p := newPKI(t)
	leaf := p.issue(t, "gateway-7")
	verified := &tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf.Cert}, VerifiedChains: [][]*x509.Certificate{{leaf.Cert, p.ca.Cert}}}
	unverified := &tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf.Cert}}
	for _, c := range []struct {
		names []string
		cs    *tls.ConnectionState
		want  bool
	}{
		{nil, verified, true},
		{[]string{"gateway-*"}, verified, true},
		{[]string{"gateway-7"}, verified, true},
		{[]string{"localhost"}, verified, true}, // a DNS name
		{[]string{"admin-*"}, verified, false},
		{[]string{"gateway-"}, verified, false},
		{nil, unverified, false},
		{nil, nil, false},
	} {
		ch := tlsconf.Channel{Auth: tlsconf.AuthCertificate, ClientNames: c.names}
		if got := ch.Allows(c.cs); got != c.want {
			t.Errorf("names %q verified=%v: Allows = %v, want %v", c.names, c.cs != nil && c.cs.VerifiedChains != nil, got, c.want)
		}
	}
}

func TestValidate(t *testing.T) {
	good := serverConfig("c", "k", "ca")
	for name, c := range map[string]struct {
		err  error
		want string
	}{
		"cert without key": {serverConfig("c", "", "").Validate("x.tls"), "x.tls.cert_file and key_file"},
		"ca without tls":   {serverConfig("", "", "ca").Validate("x.tls"), "x.tls.client_ca_file"},
		"require without ca": {func() error {
			c := serverConfig("c", "k", "")
			c.ClientAuth = tlsconf.ClientAuthRequire
			return c.Validate("x.tls")
		}(), "x.tls.client_auth"},
		"bad auth":                  {tlsconf.Channel{Auth: "password"}.Validate("x.sync", good, false), "x.sync.auth"},
		"certificate for consumers": {tlsconf.Channel{Auth: tlsconf.AuthCertificate}.Validate("x.consumers", good, true), "x.consumers.auth"},
		"certificate without ca":    {tlsconf.Channel{Auth: tlsconf.AuthCertificate}.Validate("x.sync", serverConfig("c", "k", ""), false), "client_ca_file"},
		"bad pattern":               {tlsconf.Channel{Auth: tlsconf.AuthToken, ClientNames: []string{"a*b"}}.Validate("x.sync", good, false), "x.sync.client_names[0]"},
		"client half pair":          {tlsconf.ClientConfig{CertFile: "c"}.Validate("x"), "x.cert_file"},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to name %s", name, c.err, c.want)
		}
	}
	if err := good.Validate("x"); err != nil {
		t.Errorf("good config: %v", err)
	}
}

func TestWriteFileIsPrivate(t *testing.T) {
	p := newPKI(t)
	_, key := p.write(t, p.issue(t, "x"), "x")
	info, err := os.Stat(key)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Fatalf("key mode %v, want 0600", info.Mode().Perm())
	}
	if _, err := tlsconf.NewServer(serverConfig(filepath.Join(p.dir, "missing.crt"), key, ""), nil); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}
