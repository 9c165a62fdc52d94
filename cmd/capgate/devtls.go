package main

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/gateway"
	"github.com/capgate/capgate/tlsconf"
)

// capgate dev --tls keeps a throwaway PKI in DATA-DIR/tls (directory 0700,
// every file 0600): a CA, one certificate each for the coordinator and the
// gateway (127.0.0.1, ::1, localhost; the gateway's also serves as its
// client certificate on the sync channel) and one for a consumer or
// operator who wants to try mTLS. It is made once and kept while every
// certificate has devTLSRenew left; the CA's key is not kept, so any
// renewal makes a new CA.
const (
	devTLSDir         = "tls"
	devTLSTTL         = 90 * 24 * time.Hour
	devTLSRenew       = 7 * 24 * time.Hour
	devGatewayName    = "dev-gateway"
	devClientCertName = "capgate-dev-client"
)

var devTLSHosts = []string{"127.0.0.1", "::1", "localhost"}

// devPKI names the files of DATA-DIR/tls.
type devPKI struct {
	dir                             string
	CA                              string
	CoordinatorCert, CoordinatorKey string
	GatewayCert, GatewayKey         string
	ClientCert, ClientKey           string
}

func devPKIFiles(dataDir string) devPKI {
	dir, _ := filepath.Abs(filepath.Join(dataDir, devTLSDir))
	p := func(name string) string { return filepath.Join(dir, name) }
	return devPKI{dir: dir, CA: p("ca.crt"),
		CoordinatorCert: p("coordinator.crt"), CoordinatorKey: p("coordinator.key"),
		GatewayCert: p(devGatewayName + ".crt"), GatewayKey: p(devGatewayName + ".key"),
		ClientCert: p(devClientCertName + ".crt"), ClientKey: p(devClientCertName + ".key")}
}

// ensureDevPKI returns the PKI of dataDir, making a new one when a file
// is missing or a certificate is close to expiry.
func ensureDevPKI(dataDir string, now time.Time) (devPKI, error) {
	p := devPKIFiles(dataDir)
	if p.valid(now) {
		return p, nil
	}
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return p, fmt.Errorf("dev: tls dir: %w", err)
	}
	ca, err := tlsconf.NewCA("capgate dev CA", now, devTLSTTL)
	if err != nil {
		return p, fmt.Errorf("dev: %w", err)
	}
	for _, leaf := range []struct{ name, file string }{
		{"coordinator", "coordinator"}, {devGatewayName, devGatewayName}, {devClientCertName, devClientCertName},
	} {
		l, err := ca.Issue(leaf.name, devTLSHosts, now, devTLSTTL)
		if err != nil {
			return p, fmt.Errorf("dev: %w", err)
		}
		if _, _, err := l.Write(p.dir, leaf.file); err != nil {
			return p, fmt.Errorf("dev: %w", err)
		}
	}
	if err := tlsconf.WriteFile(p.CA, ca.PEM); err != nil {
		return p, fmt.Errorf("dev: %w", err)
	}
	return p, nil
}

// valid reports whether every file exists and every certificate has
// devTLSRenew left.
func (p devPKI) valid(now time.Time) bool {
	for _, f := range []string{p.CA, p.CoordinatorCert, p.GatewayCert, p.ClientCert} {
		b, err := os.ReadFile(f)
		if err != nil {
			return false
		}
		block, _ := pem.Decode(b)
		if block == nil {
			return false
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil || cert.NotAfter.Sub(now) < devTLSRenew {
			return false
		}
	}
	for _, f := range []string{p.CoordinatorKey, p.GatewayKey, p.ClientKey} {
		if _, err := os.Stat(f); errors.Is(err, os.ErrNotExist) {
			return false
		}
	}
	return true
}

// client is the TLS a dev client uses: the CA only.
func (p devPKI) client() tlsconf.ClientConfig { return tlsconf.ClientConfig{CAFile: p.CA} }

// apply turns TLS on in the dev configs: both listeners serve it, the
// coordinator asks for client certificates and demands the gateway's on
// the sync channel besides the sync token; admin and consumers keep
// tokens only (curl works with --cacert alone).
func (p devPKI) apply(cc *coordinator.Config, gc *gateway.Config) {
	cc.TLS.CertFile, cc.TLS.KeyFile, cc.TLS.ClientCAFile = p.CoordinatorCert, p.CoordinatorKey, p.CA
	cc.TLS.Sync = tlsconf.Channel{Auth: tlsconf.AuthTokenAndCertificate, ClientNames: []string{devGatewayName}}
	gc.TLS.CertFile, gc.TLS.KeyFile, gc.TLS.ClientCAFile = p.GatewayCert, p.GatewayKey, p.CA
	gc.CoordinatorTLS = tlsconf.ClientConfig{CAFile: p.CA, CertFile: p.GatewayCert, KeyFile: p.GatewayKey}
}
