package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"time"

	"go.uber.org/zap"
)

// cipherSuites are the TLS 1.2 suites offered: ECDHE key exchange with
// AEAD ciphers only (TLS 1.3 suites are not configurable and all modern).
var cipherSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// Server is a listener's TLS with its files reloaded on change.
type Server struct {
	files *reloader[serverState]
	base  *tls.Config
}

// serverState is one consistent set: the certificate and the client CA
// pool, as one tls.Config answered to handshakes.
type serverState struct {
	config *tls.Config
	leaf   *x509.Certificate
}

// NewServer loads the files of cfg (which must be Enabled and valid).
func NewServer(cfg ServerConfig, log *zap.Logger) (*Server, error) {
	if log == nil {
		log = zap.NewNop()
	}
	s := &Server{base: &tls.Config{
		MinVersion:   tls.VersionTLS12,
		CipherSuites: cipherSuites,
		NextProtos:   []string{"http/1.1"},
	}}
	clientAuth := tls.NoClientCert
	if cfg.ClientCAFile != "" {
		clientAuth = tls.VerifyClientCertIfGiven
		if cfg.ClientAuth == ClientAuthRequire {
			clientAuth = tls.RequireAndVerifyClientCert
		}
	}
	parse := func(contents [][]byte) (*serverState, error) {
		return s.parse(contents, clientAuth)
	}
	files, err := newReloader([]file{{path: cfg.CertFile}, {path: cfg.KeyFile, private: true}, {path: cfg.ClientCAFile}},
		cfg.ReloadInterval, log, parse, func(st *serverState) *x509.Certificate { return st.leaf })
	if err != nil {
		return nil, err
	}
	s.files = files
	return s, nil
}

func (s *Server) parse(contents [][]byte, clientAuth tls.ClientAuthType) (*serverState, error) {
	cert, err := tls.X509KeyPair(contents[0], contents[1])
	if err != nil {
		return nil, fmt.Errorf("tls: certificate and key: %w", err)
	}
	cfg := s.base.Clone()
	cfg.Certificates = []tls.Certificate{cert}
	cfg.ClientAuth = clientAuth
	if contents[2] != nil {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(contents[2]) {
			return nil, fmt.Errorf("tls: client CA file: %w", errNoCertificates)
		}
		cfg.ClientCAs = pool
	}
	return &serverState{config: cfg, leaf: cert.Leaf}, nil
}

// Config is the tls.Config to serve with: every handshake takes the
// current snapshot (reloading it first when due).
func (s *Server) Config() *tls.Config {
	cfg := s.base.Clone()
	cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		return s.files.get().config, nil
	}
	return cfg
}

// Listener wraps ln so every connection speaks TLS.
func (s *Server) Listener(ln net.Listener) net.Listener { return tls.NewListener(ln, s.Config()) }

// Reload re-reads the files now (tests, SIGHUP-style triggers); it
// reports whether the certificate set changed.
func (s *Server) Reload() (bool, error) { return s.files.Reload() }

// NotAfter is when the serving certificate expires (capgate exports it
// as *_tls_certificate_expiry_timestamp_seconds).
func (s *Server) NotAfter() time.Time { return s.files.get().leaf.NotAfter }

// setClock replaces the reload clock (tests).
func (s *Server) setClock(now func() time.Time) { s.files.now = now }
