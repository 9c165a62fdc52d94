package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"go.uber.org/zap"
)

// TLS builds the client tls.Config: the CA bundle (read once; empty means
// the system roots) and, when set, a client certificate re-read when its
// files change. A zero ClientConfig gives nil: the library defaults.
func (c ClientConfig) TLS(log *zap.Logger) (*tls.Config, error) {
	if c.IsZero() {
		return nil, nil
	}
	if err := c.Validate("tls"); err != nil {
		return nil, err
	}
	if log == nil {
		log = zap.NewNop()
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	if c.CAFile != "" {
		b, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tls: ca file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("tls: ca file %s: %w", c.CAFile, errNoCertificates)
		}
		cfg.RootCAs = pool
	}
	if c.CertFile != "" {
		pair, err := newReloader([]file{{path: c.CertFile}, {path: c.KeyFile, private: true}}, DefaultReloadInterval, log, parsePair,
			func(c *tls.Certificate) *x509.Certificate { return c.Leaf })
		if err != nil {
			return nil, err
		}
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return pair.get(), nil
		}
	}
	return cfg, nil
}

func parsePair(contents [][]byte) (*tls.Certificate, error) {
	cert, err := tls.X509KeyPair(contents[0], contents[1])
	if err != nil {
		return nil, fmt.Errorf("tls: client certificate and key: %w", err)
	}
	return &cert, nil
}
