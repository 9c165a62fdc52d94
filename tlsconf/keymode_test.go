package tlsconf_test

import (
	"crypto/tls"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/capgate/capgate/tlsconf"
)

// TestKeyReadableByOthersRefused (redteam2 D): a listener's key file
// that its group or others may read is refused at start, naming the file
// and its mode, as the signing key ring and the KEK are; so is the
// client certificate's key (the gateway's coordinator_tls, the SDK's).
// Before, a 0644 key was served silently.
func TestKeyReadableByOthersRefused(t *testing.T) {
	p := newPKI(t)
	cert, key := p.write(t, p.issue(t, "server"), "server")
	for _, c := range []struct {
		mode os.FileMode
		text string
	}{{0o644, "-rw-r--r--"}, {0o640, "-rw-r-----"}, {0o604, "-rw----r--"}} {
		if err := os.Chmod(key, c.mode); err != nil {
			t.Fatal(err)
		}
		want := key + " has mode " + c.text + ", want 0600"
		if _, err := tlsconf.NewServer(serverConfig(cert, key, ""), nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("server key %#o: %v, want %q", c.mode, err, want)
		}
		if _, err := (tlsconf.ClientConfig{CertFile: cert, KeyFile: key}).TLS(nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("client key %#o: %v, want %q", c.mode, err, want)
		}
	}
	for _, mode := range []os.FileMode{0o600, 0o400} {
		if err := os.Chmod(key, mode); err != nil {
			t.Fatal(err)
		}
		if _, err := tlsconf.NewServer(serverConfig(cert, key, ""), nil); err != nil {
			t.Errorf("server key %#o: %v", mode, err)
		}
	}
}

// TestReloadRefusesKeyReadableByOthers: on a reload, a key made readable
// by others — the same key chmod-ed, or a new pair written 0644 — is
// refused and logged once, and the certificate already served stays;
// once the key is private again the new pair is taken.
func TestReloadRefusesKeyReadableByOthers(t *testing.T) {
	p := newPKI(t)
	first := p.issue(t, "server-1")
	cert, key := p.write(t, first, "server")
	core, logs := observer.New(zap.WarnLevel)
	s, err := tlsconf.NewServer(serverConfig(cert, key, ""), zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, s)
	serving := func() string {
		t.Helper()
		leaf, _, err := dial(addr, &tls.Config{RootCAs: p.pool})
		if err != nil {
			t.Fatal(err)
		}
		return leaf.Subject.CommonName
	}
	if err := os.Chmod(key, 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if changed, err := s.Reload(); changed || err == nil || !strings.Contains(err.Error(), key+" has mode -rw-r--r--, want 0600") {
			t.Fatalf("reload with the key 0644: %v, %v", changed, err)
		}
	}
	second := p.issue(t, "server-2")
	if err := tlsconf.WriteFile(cert, second.CertPEM); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, second.KeyPEM, 0o644); err != nil { // an existing file keeps its mode, 0644
		t.Fatal(err)
	}
	if changed, err := s.Reload(); changed || err == nil {
		t.Fatalf("reload of a new pair with the key 0644: %v, %v", changed, err)
	}
	if got := serving(); got != "server-1" {
		t.Fatalf("serving %s after refused reloads, want server-1", got)
	}
	refused := logs.FilterMessage("tls: changed files refused; still serving the previous ones")
	if refused.Len() != 1 || !strings.Contains(refused.All()[0].ContextMap()["error"].(string), "-rw-r--r--") {
		t.Fatalf("refusals logged: %v, want one naming the mode", refused.All())
	}
	if err := os.Chmod(key, 0o600); err != nil {
		t.Fatal(err)
	}
	if changed, err := s.Reload(); !changed || err != nil {
		t.Fatalf("reload with the key 0600 again: %v, %v", changed, err)
	}
	if got := serving(); got != "server-2" {
		t.Fatalf("serving %s, want server-2", got)
	}
}

// TestExpiredCertificateWarned (redteam2 D): a certificate expired or
// not valid yet is served (clients that verify it refuse it), with a
// WARN at start and on each reload that loads one; NotAfter says when
// the served one expires, for the *_tls_certificate_expiry_timestamp_seconds
// gauges alerts watch.
func TestExpiredCertificateWarned(t *testing.T) {
	p := newPKI(t)
	now := time.Now()
	// A CA valid from 3 hours ago, so a client can verify the expired
	// certificate at a time it was valid.
	ca, err := tlsconf.NewCA("old-ca", now.Add(-2*time.Hour), 4*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	p.pool.AddCert(ca.Cert)
	issue := func(name string, notBefore time.Time) tlsconf.Leaf {
		l, err := ca.Issue(name, []string{"127.0.0.1"}, notBefore, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	expired := issue("expired", now.Add(-2*time.Hour))
	cert, key := p.write(t, expired, "server")
	core, logs := observer.New(zap.WarnLevel)
	s, err := tlsconf.NewServer(serverConfig(cert, key, ""), zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	if !s.NotAfter().Equal(expired.Cert.NotAfter) {
		t.Fatalf("NotAfter %s, want %s", s.NotAfter(), expired.Cert.NotAfter)
	}
	const expiredMsg = "tls: certificate expired; serving it, but clients that verify it refuse it"
	if got := logs.FilterMessage(expiredMsg).All(); len(got) != 1 || got[0].ContextMap()["subject"] != "CN=expired" {
		t.Fatalf("warnings at start: %v", logs.All())
	}
	// Served anyway: a client whose clock says it is still valid takes it.
	leaf, _, err := dial(serve(t, s), &tls.Config{RootCAs: p.pool, Time: func() time.Time { return expired.Cert.NotAfter.Add(-time.Minute) }})
	if err != nil || leaf.Subject.CommonName != "expired" {
		t.Fatalf("dial: %v", err)
	}
	future := issue("future", now.Add(2*time.Hour)) // Issue backdates an hour: valid from 1h on
	writePair(t, cert, key, future)
	if changed, err := s.Reload(); !changed || err != nil {
		t.Fatalf("reload: %v, %v", changed, err)
	}
	if logs.FilterMessage("tls: certificate not valid yet; serving it, but clients that verify it refuse it").Len() != 1 || !s.NotAfter().Equal(future.Cert.NotAfter) {
		t.Fatalf("after reloading a not-yet-valid certificate: %v, NotAfter %s", logs.All(), s.NotAfter())
	}
	writePair(t, cert, key, issue("good", now))
	if changed, err := s.Reload(); !changed || err != nil {
		t.Fatalf("reload: %v, %v", changed, err)
	}
	if logs.Len() != 2 {
		t.Fatalf("a valid certificate warned: %v", logs.All())
	}
}

func writePair(t *testing.T, cert, key string, l tlsconf.Leaf) {
	t.Helper()
	if err := tlsconf.WriteFile(cert, l.CertPEM); err != nil {
		t.Fatal(err)
	}
	if err := tlsconf.WriteFile(key, l.KeyPEM); err != nil {
		t.Fatal(err)
	}
}
