package coordinator_test

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/tlsconf"
)

// testPKI is a CA and the certificates a TLS test hands out.
type testPKI struct {
	ca   *tlsconf.CA
	dir  string
	pool *x509.CertPool
}

func newTestPKI(t testing.TB) *testPKI {
	t.Helper()
	ca, err := tlsconf.NewCA("test ca", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	p := &testPKI{ca: ca, dir: t.TempDir(), pool: x509.NewCertPool()}
	p.pool.AddCert(ca.Cert)
	return p
}

func (p *testPKI) files(t testing.TB, name string) (cert, key string) {
	t.Helper()
	l, err := p.ca.Issue(name, []string{"127.0.0.1"}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if cert, key, err = l.Write(p.dir, name); err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func (p *testPKI) caFile(t testing.TB) string {
	t.Helper()
	path := p.dir + "/ca.crt"
	if err := tlsconf.WriteFile(path, p.ca.PEM); err != nil {
		t.Fatal(err)
	}
	return path
}

// client is an HTTP client trusting the CA, presenting name's
// certificate unless name is "".
func (p *testPKI) client(t testing.TB, name string) *http.Client {
	t.Helper()
	cfg := tlsconf.ClientConfig{CAFile: p.caFile(t)}
	if name != "" {
		cfg.CertFile, cfg.KeyFile = p.files(t, name)
	}
	tc, err := cfg.TLS(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: 10 * time.Second}
}

func getStatus(t testing.TB, c *http.Client, url, token string) (int, api.Code) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK {
		return resp.StatusCode, ""
	}
	return resp.StatusCode, errorCode(t, b)
}

// TestTLSChannels: one TLS listener; public routes need nothing, the
// sync channel takes a gateway certificate instead of the sync token,
// the admin routes want an admin certificate and the admin token, and
// plaintext is refused.
func TestTLSChannels(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 2})
	p := newTestPKI(t)
	e.cfg.TLS.CertFile, e.cfg.TLS.KeyFile = p.files(t, "coordinator")
	e.cfg.TLS.ClientCAFile = p.caFile(t)
	e.cfg.TLS.Sync = tlsconf.Channel{Auth: tlsconf.AuthCertificate, ClientNames: []string{"gateway-*"}}
	e.cfg.TLS.Admin = tlsconf.Channel{Auth: tlsconf.AuthTokenAndCertificate, ClientNames: []string{"admin-*"}}
	e.clientTLS = &tls.Config{RootCAs: p.pool}
	h := e.start(t)
	if !strings.HasPrefix(h.base, "https://") {
		t.Fatalf("base %s, want https", h.base)
	}
	anonymous, gateway, admin := p.client(t, ""), p.client(t, "gateway-1"), p.client(t, "admin-1")
	sync := h.base + "/v1/sync?gateway=gateway-1&wait_ms=0"
	groups := h.base + "/v1/admin/groups"
	for _, c := range []struct {
		name   string
		client *http.Client
		url    string
		token  string
		status int
		code   api.Code
	}{
		{"public healthz", anonymous, h.base + "/healthz", "", 200, ""},
		{"sync, token but no certificate", anonymous, sync, e.syncToken, 403, api.CodeClientCertificateRequired},
		{"sync, gateway certificate instead of the token", gateway, sync, "", 200, ""},
		{"sync, admin certificate", admin, sync, "", 403, api.CodeClientCertificateRequired},
		{"admin, token but no certificate", anonymous, groups, e.adminToken, 403, api.CodeClientCertificateRequired},
		{"admin, gateway certificate and token", gateway, groups, e.adminToken, 403, api.CodeClientCertificateRequired},
		{"admin, certificate but no token", admin, groups, "", 401, api.CodeUnauthorized},
		{"admin, certificate and token", admin, groups, e.adminToken, 200, ""},
	} {
		status, code := getStatus(t, c.client, c.url, c.token)
		if status != c.status || code != c.code {
			t.Errorf("%s: %d %s, want %d %s", c.name, status, code, c.status, c.code)
		}
	}
	// Plaintext is answered, in plaintext, 400 "use https://" (before,
	// the connection closed without a word: EOF).
	plain := "http" + strings.TrimPrefix(h.base, "https")
	resp, err := http.Get(plain + "/healthz")
	if err != nil {
		t.Fatalf("plaintext request to the TLS listener: %v, want a 400 answer", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || errorCode(t, b) != api.CodeBadRequest ||
		!strings.Contains(string(b), tlsconf.PlaintextMessage) || resp.Header.Get(tlsconf.HeaderTLSRequired) != "https" {
		t.Fatalf("plaintext request to the TLS listener: %d %s %s, want 400 %q", resp.StatusCode, resp.Header, b, tlsconf.PlaintextMessage)
	}
	e.checkLogs(t)
}
