package broker

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// TestTLS: fetches (on capgate's own fetch connections) and produce (on
// kgo's) reach a broker that speaks only TLS, verified against the CA
// file.
func TestTLS(t *testing.T) {
	cert, caFile := selfSigned(t)
	e := startEmbedded(t, EmbeddedConfig{
		Topics:  map[string]int32{"t": 1},
		Options: []kfake.Opt{kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})},
	})
	c := newTestClient(t, e, func(cfg *Config) { cfg.TLS = TLSConfig{Enabled: true, CAFile: caFile} })
	base := produce(t, c, "t", 0, makeRecords(0, 3))
	for _, raw := range []bool{false, true} {
		res, err := c.Fetch(testCtx(t), FetchRequest{Topic: "t", Offset: base, Raw: raw, MaxWait: time.Second})
		if err != nil || res.NextOffset != base+3 {
			t.Fatalf("raw %t: fetch over TLS: %+v, %v", raw, res, err)
		}
	}
}

// TestTLSClientKeyModeChecked: the mutual-TLS client key is a secret
// file like every other key capgate reads (internal/secretfile): one that
// its group or others can read is refused, naming the key and its mode.
func TestTLSClientKeyModeChecked(t *testing.T) {
	cert, caFile := selfSigned(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "client.pem"), filepath.Join(dir, "client.key")
	der, err := x509.MarshalECPrivateKey(cert.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := TLSConfig{Enabled: true, CAFile: caFile, CertFile: certFile, KeyFile: keyFile}
	if tc, err := cfg.build(); err != nil || len(tc.Certificates) != 1 {
		t.Fatalf("0600 key: %v", err)
	}
	if err := os.Chmod(keyFile, 0o644); err != nil {
		t.Fatal(err)
	}
	want := "broker.tls.key_file: " + keyFile + " has mode -rw-r--r--, want 0600"
	if _, err := cfg.build(); err == nil || err.Error() != want {
		t.Fatalf("0644 key: %v, want %q", err, want)
	}
}

// selfSigned makes a certificate for 127.0.0.1 and writes it as a CA file.
func selfSigned(t *testing.T) (tls.Certificate, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kfake"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, caFile
}
