package broker

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
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

// TestTLSFollowsARotatedCAFile: broker.tls.ca_file is re-read when it
// changes, so a broker fleet moved to a new CA is trusted by the next
// connection of the same client — kgo's (produce) and capgate's own
// fetch connections — without a restart, and the old CA is no longer
// trusted. The brokers switch to a certificate of CA B while the client
// trusts the file holding CA A; the file is then replaced by one holding
// B alone, and the partition moved to the broker the client has not
// opened a produce or fetch connection to, so both must dial anew.
// Before, the file was read once at start: the new connections were
// refused (x509: certificate signed by unknown authority) until a
// restart.
func TestTLSFollowsARotatedCAFile(t *testing.T) {
	certA, caA := selfSigned(t)
	certB, caB := selfSigned(t)
	var serving atomic.Pointer[tls.Certificate]
	serving.Store(&certA)
	e := startEmbedded(t, EmbeddedConfig{
		Brokers: 2,
		Topics:  map[string]int32{"t": 1},
		Options: []kfake.Opt{kfake.TLS(&tls.Config{MinVersion: tls.VersionTLS12,
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return serving.Load(), nil }})},
	})
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	install := func(from string) { // as an operator's tooling does: a new file renamed over the old
		t.Helper()
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(caFile+".new", b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(caFile+".new", caFile); err != nil {
			t.Fatal(err)
		}
	}
	install(caA)
	c := newTestClient(t, e, func(cfg *Config) {
		cfg.TLS = TLSConfig{Enabled: true, CAFile: caFile, reloadInterval: time.Nanosecond} // checked on every dial
	})
	base := produce(t, c, "t", 0, makeRecords(0, 3))
	if res, err := c.Fetch(testCtx(t), FetchRequest{Topic: "t", Offset: base, MaxWait: time.Second}); err != nil || res.NextOffset != base+3 {
		t.Fatalf("fetch over TLS with CA A: %+v, %v", res, err)
	}

	serving.Store(&certB)
	install(caB)
	leader := e.Cluster().LeaderFor("t", 0)
	if err := e.Cluster().MoveTopicPartition("t", 0, 1-leader); err != nil {
		t.Fatal(err)
	}
	next := produce(t, c, "t", 0, makeRecords(3, 2)) // kgo's new produce connection
	if next != base+3 {
		t.Fatalf("produce after the move at offset %d, want %d", next, base+3)
	}
	var last error
	for deadline := time.Now().Add(15 * time.Second); ; {
		res, err := c.Fetch(testCtx(t), FetchRequest{Topic: "t", Offset: next, MaxWait: time.Second})
		if err == nil && res.NextOffset == next+2 {
			break
		}
		last = err
		if time.Now().After(deadline) {
			t.Fatalf("fetch from the other broker after the CA rotation: %+v, last error %v", res, last)
		}
		time.Sleep(20 * time.Millisecond) // between polls of a condition with a deadline
	}

	serving.Store(&certA) // a broker still on the old CA is refused now
	_, err := c.fetchPools.spec.dial(testCtx(t), e.Addrs()[0])
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Fatalf("a new connection to a broker of the old CA: %v, want x509.UnknownAuthorityError", err)
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
