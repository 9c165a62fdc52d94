package tlsconf

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"time"

	"go.uber.org/zap"
)

// Client is the TLS of a long-lived client (the gateway's sync client,
// the Kafka listener's coordinator clients, the SDK, the CLI, the test
// stack): its CA bundle and its client certificate are re-read when
// their files change (checked at most every DefaultReloadInterval, on a
// dial), so a CA rotated on disk is trusted by the next connection
// without a restart.
//
// Why a config per dial: a tls.Config's RootCAs cannot change under
// connections being made with it, and the usual way around that —
// InsecureSkipVerify plus a VerifyConnection that verifies against a
// reloaded pool — cannot check the host of an IP-literal URL (crypto/tls
// sends no SNI for an IP, so ConnectionState.ServerName is empty there
// and the host check would be skipped). Each dial instead gets a clone
// with RootCAs = the bundle as last read and ServerName = the host
// dialled, and crypto/tls verifies as it always does, IP SANs included.
//
// A nil *Client is "no TLS settings": Apply leaves a transport on the
// library's defaults (the system roots). Safe for concurrent use.
type Client struct {
	base  *tls.Config              // no RootCAs, no ServerName
	roots *reloader[x509.CertPool] // nil: the system roots
}

// Client builds the settings' Client; a zero ClientConfig gives nil.
func (c ClientConfig) Client(log *zap.Logger) (*Client, error) {
	if c.IsZero() {
		return nil, nil
	}
	if err := c.Validate("tls"); err != nil {
		return nil, err
	}
	return c.ClientWith(&tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}, DefaultReloadInterval, log)
}

// ClientWith is Client for a protocol other than HTTPS (the broker
// client's Kafka connections): each connection's config is a clone of
// base — its RootCAs, ServerName and GetClientCertificate replaced by
// the files' and For's — with the files re-read at most every interval
// (<= 0: DefaultReloadInterval). Unlike Client, a zero c gives a
// Client too (base on the system roots). c is not validated here.
func (c ClientConfig) ClientWith(base *tls.Config, interval time.Duration, log *zap.Logger) (*Client, error) {
	if log == nil {
		log = zap.NewNop()
	}
	if interval <= 0 {
		interval = DefaultReloadInterval
	}
	cl := &Client{base: base.Clone()}
	cl.base.RootCAs, cl.base.ServerName, cl.base.GetClientCertificate = nil, "", nil
	if c.CAFile != "" {
		roots, err := newReloader([]file{{path: c.CAFile}}, interval, log, parsePool(c.CAFile),
			func(*x509.CertPool) *x509.Certificate { return nil })
		if err != nil {
			return nil, err // names the file
		}
		cl.roots = roots
	}
	if c.CertFile != "" {
		pair, err := newReloader([]file{{path: c.CertFile}, {path: c.KeyFile, private: true}}, interval, log, parsePair,
			func(c *tls.Certificate) *x509.Certificate { return c.Leaf })
		if err != nil {
			return nil, err
		}
		cl.base.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return pair.get(), nil
		}
	}
	return cl, nil
}

// TLS is a snapshot of the settings: a tls.Config trusting the CA
// bundle as it is now (nil: the library defaults). For a one-shot client;
// a long-lived one takes Client, which follows the file.
func (c ClientConfig) TLS(log *zap.Logger) (*tls.Config, error) {
	cl, err := c.Client(log)
	if cl == nil || err != nil {
		return nil, err
	}
	return cl.For(""), nil
}

// For is the tls.Config of one connection to serverName (a host name or
// an IP literal, verified as such; "" leaves it to the caller): the
// CA bundle as last read, re-read first when DefaultReloadInterval has
// passed since the last check.
func (c *Client) For(serverName string) *tls.Config {
	cfg := c.base.Clone()
	cfg.ServerName = serverName
	if c.roots != nil {
		cfg.RootCAs = c.roots.get()
	}
	return cfg
}

// Apply makes t's https connections use c: t.DialTLSContext dials with
// t.DialContext (a net.Dialer of 30 s without one) and handshakes with
// For(the host dialled), bounded by t.TLSHandshakeTimeout. Requests
// through an HTTP proxy are tunnelled by Go's transport itself with
// t.TLSClientConfig, set to the bundle as read now. Nil c changes
// nothing.
func (c *Client) Apply(t *http.Transport) {
	if c == nil {
		return
	}
	dial := t.DialContext
	if dial == nil {
		dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	timeout := t.TLSHandshakeTimeout
	t.TLSClientConfig = c.For("")
	t.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		raw, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		conn := tls.Client(raw, c.For(host))
		if err := conn.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, err
		}
		return conn, nil
	}
}

// Transport is a clone of http.DefaultTransport speaking TLS with c.
func (c *Client) Transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	c.Apply(t)
	return t
}

// parsePool parses a CA bundle (file names it in errors).
func parsePool(file string) func([][]byte) (*x509.CertPool, error) {
	return func(contents [][]byte) (*x509.CertPool, error) {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(contents[0]) {
			return nil, fmt.Errorf("tls: ca file %s: %w", file, errNoCertificates)
		}
		return pool, nil
	}
}

func parsePair(contents [][]byte) (*tls.Certificate, error) {
	cert, err := tls.X509KeyPair(contents[0], contents[1])
	if err != nil {
		return nil, fmt.Errorf("tls: client certificate and key: %w", err)
	}
	return &cert, nil
}

// setClock replaces the CA bundle's reload clock (tests).
func (c *Client) setClock(now func() time.Time) { c.roots.now = now }
