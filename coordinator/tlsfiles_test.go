package coordinator_test

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/tlsconf"
)

// TestTLSKeyReadableByOthersRefused (redteam2 D): a coordinator whose
// tls.key_file its group or others may read does not start; the error
// names the file and its mode, as for the signing key ring and the KEK.
// Before, a 0644 key was served silently.
func TestTLSKeyReadableByOthersRefused(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	p := newTestPKI(t)
	e.cfg.TLS.CertFile, e.cfg.TLS.KeyFile = p.files(t, "coordinator")
	if err := os.Chmod(e.cfg.TLS.KeyFile, 0o644); err != nil {
		t.Fatal(err)
	}
	err := newCoordinatorErr(t, e)
	if err == nil {
		t.Fatal("a coordinator started with its TLS key at mode 0644")
	}
	if want := e.cfg.TLS.KeyFile + " has mode -rw-r--r--, want 0600"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q, want it to say %q", err, want)
	}
}

// TestExpiredCertificateServedWithWarningAndGauge (redteam2 D): an
// expired certificate is served (a client that verifies it refuses it)
// with a WARN at start, and /metrics exports its NotAfter as
// capgate_coordinator_tls_certificate_expiry_timestamp_seconds, which
// deploy/prometheus/alerts.yml watches. Before, nothing said so.
func TestExpiredCertificateServedWithWarningAndGauge(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	now := time.Now()
	ca, err := tlsconf.NewCA("old ca", now.Add(-2*time.Hour), 4*time.Hour) // valid from 3 h ago
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Issue("coordinator", []string{"127.0.0.1"}, now.Add(-2*time.Hour), time.Hour) // expired an hour ago
	if err != nil {
		t.Fatal(err)
	}
	if e.cfg.TLS.CertFile, e.cfg.TLS.KeyFile, err = leaf.Write(t.TempDir(), "coordinator"); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	// The harness's client checks the certificate at a time it was valid.
	e.clientTLS = &tls.Config{RootCAs: pool, Time: func() time.Time { return leaf.Cert.NotAfter.Add(-time.Minute) }}
	h := e.start(t)
	warned := e.logs.FilterMessage("tls: certificate expired; serving it, but clients that verify it refuse it").All()
	if len(warned) != 1 || warned[0].ContextMap()["subject"] != "CN=coordinator" {
		t.Fatalf("warnings: %v", warned)
	}
	status, body, _ := h.do(t, "GET", "/metrics", "", nil)
	if status != 200 {
		t.Fatalf("/metrics: %d", status)
	}
	const gauge = "capgate_coordinator_tls_certificate_expiry_timestamp_seconds"
	got, ok := metricValue(body, gauge)
	if !ok || int64(got) != leaf.Cert.NotAfter.Unix() {
		t.Fatalf("%s = %v (found %v), want %d", gauge, got, ok, leaf.Cert.NotAfter.Unix())
	}
	// Today's client refuses it: the warning is about something real.
	if _, err := tls.Dial("tcp", strings.TrimPrefix(h.base, "https://"), &tls.Config{RootCAs: pool}); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("a verifying client at the real time: %v", err)
	}
}

// metricValue is the value of an unlabelled metric in a text exposition.
func metricValue(exposition []byte, name string) (float64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(exposition))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			v, err := strconv.ParseFloat(rest, 64)
			return v, err == nil
		}
	}
	return 0, false
}
