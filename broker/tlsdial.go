package broker

import (
	"context"
	"crypto/tls"
	"net"
	"time"

	"go.uber.org/zap"

	"github.com/capgate/capgate/tlsconf"
)

// brokerTLS is the TLS of every connection to the brokers — kgo's
// (metadata, produce, the coordinator's state log) and capgate's own
// fetch connections: a config per dial from a tlsconf.Client, so a CA
// bundle (broker.tls.ca_file) or client certificate rotated on disk is
// used by the next connection without a restart — the files are re-read
// at most every tlsconf.DefaultReloadInterval, on a dial; a bundle that
// does not parse keeps the last good one. A connection already open
// keeps the CA it was verified with until it closes.
type brokerTLS struct {
	client     *tlsconf.Client
	serverName string // broker.tls.server_name; "": the host dialled
}

// newBrokerTLS builds t's brokerTLS; nil when TLS is off. The files are
// read at once (build), so a bad one fails the start naming its setting.
func newBrokerTLS(t TLSConfig, log *zap.Logger) (*brokerTLS, error) {
	if !t.Enabled {
		return nil, nil
	}
	base, err := t.build()
	if err != nil {
		return nil, err
	}
	base.RootCAs, base.Certificates = nil, nil // the files', as last read, per dial
	files := tlsconf.ClientConfig{CAFile: t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile}
	cl, err := files.ClientWith(base, t.reloadInterval, log)
	if err != nil {
		return nil, err
	}
	return &brokerTLS{client: cl, serverName: t.ServerName}, nil
}

// config is the tls.Config of one connection to addr (host:port).
func (b *brokerTLS) config(addr string) *tls.Config {
	name := b.serverName
	if name == "" {
		name, _, _ = net.SplitHostPort(addr)
	}
	return b.client.For(name)
}

// dialer is kgo's Dialer: TCP, then the TLS handshake with config(addr),
// both within timeout (kgo's DialTimeout, which a Dialer replaces).
func (b *brokerTLS) dialer(timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		raw, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		conn := tls.Client(raw, b.config(addr))
		if err := conn.HandshakeContext(ctx); err != nil {
			_ = raw.Close()
			return nil, err
		}
		return conn, nil
	}
}
