package tlsconf_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capgate/capgate/tlsconf"
)

// serveTLS starts an HTTPS server on 127.0.0.1 presenting leaf.
func serveTLS(t *testing.T, leaf tlsconf.Leaf) string {
	t.Helper()
	cert, err := leaf.TLS()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.URL // https://127.0.0.1:port: an IP literal
}

// TestClientFollowsCAFile: a long-lived client's CA bundle is re-read
// when the file changes (dayone2 #1: it was read once, so rotating the
// CA cut every gateway off its coordinator until a restart). The CA file
// is replaced by a new CA; once the reload interval passed, the next
// connection verifies against the new CA and no longer trusts the old;
// a server of the new CA whose certificate does not name the dialled IP
// is still refused (the host of an IP-literal URL is verified, which an
// InsecureSkipVerify + VerifyConnection reload would skip); a bundle
// replaced by something that is not PEM keeps the last good one.
func TestClientFollowsCAFile(t *testing.T) {
	oldCA, newCA := newPKI(t), newPKI(t)
	oldServer := serveTLS(t, oldCA.issue(t, "old"))
	newServer := serveTLS(t, newCA.issue(t, "new"))
	elsewhere, err := newCA.ca.Issue("elsewhere", []string{"coordinator.example"}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	wrongName := serveTLS(t, elsewhere)

	caFile := oldCA.caFile(t)
	cl, err := tlsconf.ClientConfig{CAFile: caFile}.Client(nil)
	if err != nil {
		t.Fatal(err)
	}
	var offset atomic.Int64
	tlsconf.SetClientClock(cl, func() time.Time { return time.Now().Add(time.Duration(offset.Load())) })
	hc := &http.Client{Transport: cl.Transport(), Timeout: 10 * time.Second}
	getting := func(url string) error {
		hc.CloseIdleConnections() // each call a new connection: a new dial
		resp, err := hc.Get(url)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	var unknown x509.UnknownAuthorityError
	if err := getting(oldServer); err != nil {
		t.Fatalf("the old CA's server before the rotation: %v", err)
	}
	if err := getting(newServer); !errors.As(err, &unknown) {
		t.Fatalf("the new CA's server before the rotation: %v, want unknown authority", err)
	}

	if err := os.WriteFile(caFile, newCA.ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := getting(newServer); !errors.As(err, &unknown) {
		t.Fatalf("within the reload interval the bundle was re-read already: %v", err)
	}
	offset.Store(int64(tlsconf.DefaultReloadInterval + time.Second))
	if err := getting(newServer); err != nil {
		t.Fatalf("the new CA's server after the rotation: %v", err)
	}
	if err := getting(oldServer); !errors.As(err, &unknown) {
		t.Fatalf("the old CA's server after the rotation: %v, want unknown authority", err)
	}
	var hostname x509.HostnameError
	if err := getting(wrongName); !errors.As(err, &hostname) || !strings.Contains(err.Error(), "127.0.0.1") {
		t.Fatalf("a certificate of the trusted CA not naming 127.0.0.1: %v, want a hostname error", err)
	}

	if err := os.WriteFile(caFile, []byte("half a PEM"), 0o644); err != nil {
		t.Fatal(err)
	}
	offset.Store(int64(3 * tlsconf.DefaultReloadInterval))
	if err := getting(newServer); err != nil {
		t.Fatalf("a broken bundle replaced the last good one: %v", err)
	}
}

// A zero ClientConfig is no Client, and Apply on it leaves the
// transport on the library's defaults.
func TestZeroClientChangesNothing(t *testing.T) {
	cl, err := tlsconf.ClientConfig{}.Client(nil)
	if cl != nil || err != nil {
		t.Fatalf("zero config: %v %v", cl, err)
	}
	tr := &http.Transport{}
	cl.Apply(tr)
	if tr.DialTLSContext != nil || tr.TLSClientConfig != nil {
		t.Fatal("a nil Client changed the transport")
	}
}
