package gateway

// Behavior: the HTTP listener's accept side (internal/connguard). A
// temporary accept error (out of file descriptors under a connection
// flood) is retried with a backoff, never the end of Serve and of the
// process (redteam6 #0). max_connections bounds the connections open at
// once and max_connections_per_address those of one client address (the
// socket's peer: X-Forwarded-For is not read at accept, so a peer in
// trusted_proxies is bounded by max_connections only); beyond either a
// new connection is answered 503 overloaded (JSON, Retry-After; nothing
// under TLS, whose handshake would hold the accept loop) and closed
// (redteam6 #1). At start the connection settings are compared with the
// descriptor limit (RLIMIT_NOFILE): when they do not fit, fewer HTTP
// connections are served at once, and a line names the numbers and the
// settings (connguard.FitDescriptors).

import (
	"net"

	"github.com/capgate/capgate/internal/connguard"
)

// guardListener wraps the listener below TLS and internal/crlf.
func (g *Gateway) guardListener(ln net.Listener) *connguard.Listener {
	var others []connguard.Budget
	if g.kafka != nil {
		others = append(others, connguard.Budget{Setting: "gateway.kafka_max_connections", Conns: g.cfg.KafkaMaxConnections})
	}
	return connguard.ListenServer(ln, connguard.Server{
		Who: "the gateway", Process: "gateway",
		Max:    connguard.Budget{Setting: "gateway.max_connections", Conns: g.cfg.MaxConnections},
		Others: others, PerAddress: g.cfg.MaxConnectionsPerAddress, IdleTimeout: g.cfg.IdleTimeout,
		Exempt: g.proxies.Trusts, TLS: g.tls != nil,
	}, g.log.Named("http"), g.metrics.registry)
}
