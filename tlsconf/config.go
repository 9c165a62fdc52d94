package tlsconf

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Client certificate policies of a listener's handshake.
const (
	ClientAuthIfGiven = "verify_if_given" // ask; verify what is given; routes decide
	ClientAuthRequire = "require"         // the handshake fails without a valid one
)

// Route authentication: what a Channel demands.
const (
	AuthToken               = "token"             // a bearer token only (a certificate is ignored)
	AuthCertificate         = "certificate"       // a client certificate instead of the token
	AuthTokenAndCertificate = "token+certificate" // both
)

// DefaultReloadInterval is how often, at most, certificate files are
// re-read (on the next handshake after it passed).
const DefaultReloadInterval = 5 * time.Second

// ServerConfig is a listener's TLS: off while cert_file is empty.
type ServerConfig struct {
	// CertFile and KeyFile are the PEM certificate chain and private key.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ClientCAFile, when set, is the PEM bundle client certificates must
	// chain to; clients are then asked for one (see ClientAuth).
	ClientCAFile string `yaml:"client_ca_file"`
	// ClientAuth is verify_if_given (routes decide, see Channel) or
	// require (no handshake without a valid client certificate).
	ClientAuth string `yaml:"client_auth"`
	// ReloadInterval: the files are re-read at most this often, on a
	// handshake; a changed set that parses replaces the old one whole.
	ReloadInterval time.Duration `yaml:"reload_interval"`
}

// DefaultServerConfig is TLS off, with the defaults it uses once on.
func DefaultServerConfig() ServerConfig {
	return ServerConfig{ClientAuth: ClientAuthIfGiven, ReloadInterval: DefaultReloadInterval}
}

// Enabled reports whether the listener serves TLS.
func (c ServerConfig) Enabled() bool { return c.CertFile != "" }

// Validate names the first bad field under prefix (e.g. "coordinator.tls").
func (c ServerConfig) Validate(prefix string) error {
	switch {
	case (c.CertFile == "") != (c.KeyFile == ""):
		return fmt.Errorf("%s.cert_file and key_file: set both or neither, got cert_file %q key_file %q", prefix, c.CertFile, c.KeyFile)
	case c.ClientCAFile != "" && c.CertFile == "":
		return fmt.Errorf("%s.client_ca_file: needs cert_file and key_file (client certificates need TLS), got %q", prefix, c.ClientCAFile)
	case c.ClientAuth != ClientAuthIfGiven && c.ClientAuth != ClientAuthRequire:
		return fmt.Errorf("%s.client_auth: want %s or %s, got %q", prefix, ClientAuthIfGiven, ClientAuthRequire, c.ClientAuth)
	case c.ClientAuth == ClientAuthRequire && c.ClientCAFile == "":
		return fmt.Errorf("%s.client_auth: %s needs client_ca_file", prefix, ClientAuthRequire)
	case c.ReloadInterval <= 0:
		return fmt.Errorf("%s.reload_interval: must be > 0, got %s", prefix, c.ReloadInterval)
	}
	return nil
}

// Channel is what one class of routes demands from a caller: a bearer
// token, a client certificate, or both.
type Channel struct {
	// Auth is token, certificate (instead of the token) or
	// token+certificate.
	Auth string `yaml:"auth"`
	// ClientNames limit which verified certificates count: patterns
	// matched against the certificate's common name, DNS and URI names;
	// a trailing "*" matches any suffix ("gateway-*"). Empty: any
	// certificate the client CA signed.
	ClientNames []string `yaml:"client_names"`
}

// DefaultChannel demands a token only.
func DefaultChannel() Channel { return Channel{Auth: AuthToken, ClientNames: []string{}} }

// NeedsToken reports whether the bearer token is required.
func (ch Channel) NeedsToken() bool { return ch.Auth != AuthCertificate }

// NeedsCertificate reports whether a client certificate is required.
func (ch Channel) NeedsCertificate() bool { return ch.Auth != AuthToken }

// Validate checks ch under prefix; tokenOnly channels (consumers, who
// always present a credential or capability) refuse certificate alone.
// server is the listener it belongs to.
func (ch Channel) Validate(prefix string, server ServerConfig, tokenRequired bool) error {
	switch ch.Auth {
	case AuthToken, AuthTokenAndCertificate:
	case AuthCertificate:
		if tokenRequired {
			return fmt.Errorf("%s.auth: these routes always take a bearer token: want %s or %s, got %q", prefix, AuthToken, AuthTokenAndCertificate, ch.Auth)
		}
	default:
		return fmt.Errorf("%s.auth: want %s, %s or %s, got %q", prefix, AuthToken, AuthCertificate, AuthTokenAndCertificate, ch.Auth)
	}
	if ch.NeedsCertificate() && server.ClientCAFile == "" {
		return fmt.Errorf("%s.auth: %s needs the listener's client_ca_file", prefix, ch.Auth)
	}
	for i, n := range ch.ClientNames {
		if n == "" || strings.Count(n, "*") > 1 || (strings.Contains(n, "*") && !strings.HasSuffix(n, "*")) {
			return fmt.Errorf("%s.client_names[%d]: want a name, or a prefix ending in one \"*\", got %q", prefix, i, n)
		}
	}
	return nil
}

// ClientConfig is the TLS of an outgoing connection (SDK, CLI, the
// gateway's sync client). All empty: the system roots, no certificate.
type ClientConfig struct {
	// CAFile is a PEM bundle of the CAs the server's certificate must
	// chain to; empty: the system roots.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are the client certificate and key for mTLS,
	// re-read when they change (checked at most every DefaultReloadInterval).
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}

// Validate names the first bad field under prefix.
func (c ClientConfig) Validate(prefix string) error {
	if (c.CertFile == "") != (c.KeyFile == "") {
		return fmt.Errorf("%s.cert_file and key_file: set both or neither, got cert_file %q key_file %q", prefix, c.CertFile, c.KeyFile)
	}
	return nil
}

// IsZero reports whether nothing is set.
func (c ClientConfig) IsZero() bool { return c == ClientConfig{} }

var errNoCertificates = errors.New("no PEM certificates")
