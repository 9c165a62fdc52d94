package coordinator

// Behavior: the HTTP listener's accept side (internal/connguard), for a
// coordinator and a replica alike. A temporary accept error (out of file
// descriptors under a connection flood) is retried with a backoff, never
// the end of Serve and of the process (redteam6 #0). max_connections
// bounds the connections open at once and max_connections_per_address
// those of one client address (the socket's peer: X-Forwarded-For is not
// read at accept, so a peer in trusted_proxies is bounded by
// max_connections only); beyond either a new connection is answered 503
// overloaded (JSON, Retry-After; nothing under TLS, whose handshake
// would hold the accept loop) and closed (redteam6 #1). At start the
// connection settings are compared with the descriptor limit
// (RLIMIT_NOFILE): when they do not fit, fewer HTTP connections are
// served at once, and a line names the numbers and the settings
// (connguard.FitDescriptors).
//
// A request sent with "Expect: 100-continue" is told to send its body
// only when it could be read (expectContinue, redteam6 #9).

import (
	"bytes"
	"net"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/internal/clientaddr"
	"github.com/capgate/capgate/internal/connguard"
	"github.com/capgate/capgate/internal/linger"
)

// guardListener wraps the raw listener ln, below TLS and internal/crlf.
func guardListener(ln net.Listener, cfg Config, proxies clientaddr.Proxies, tls bool, log *zap.Logger, reg prometheus.Registerer) *connguard.Listener {
	return connguard.ListenServer(ln, connguard.Server{
		Who: "the coordinator", Process: "coordinator",
		Max:        connguard.Budget{Setting: "coordinator.max_connections", Conns: cfg.MaxConnections},
		PerAddress: cfg.MaxConnectionsPerAddress, IdleTimeout: cfg.IdleTimeout,
		Exempt: proxies.Trusts, TLS: tls,
	}, log, reg)
}

// expectContinue is a server's ExpectHandler: a POST, PUT or PATCH sent
// with "Expect: 100-continue" to a route that needs a bearer but has
// none is answered 401 at once, and any request whose Content-Length is
// over its body cap (limit: the HeaderReceived cap, server.go; a GET's
// too, redteam7 #7) as such a body is (413; 421 at a standby) — without
// "100 Continue", so the client never sends the body. fasthttp closes the connection after either answer; it
// lingers (internal/linger) for a client that sends the body anyway.
func expectContinue(ctx *fasthttp.RequestCtx, cfg Config, limit func(*fasthttp.RequestHeader) int, onError func(*fasthttp.RequestCtx, error)) int {
	h := &ctx.Request.Header
	if (h.IsPost() || h.IsPut() || h.IsPatch()) && needsBearer(h.RequestURI(), cfg) && len(bearerOf(h)) == 0 {
		linger.OnClose(ctx)
		writeError(ctx, api.CodeUnauthorized, "bearer token required (refused before 100 Continue: the body is not read)")
		return ctx.Response.StatusCode()
	}
	if h.ContentLength() > limit(h) {
		onError(ctx, fasthttp.ErrBodyTooLarge)
		return ctx.Response.StatusCode()
	}
	return fasthttp.StatusContinue
}

// needsBearer reports whether a route under uri always needs a bearer:
// every /v1/ route, but admin and sync routes whose channel takes a
// client certificate instead (tls.admin / tls.sync auth: certificate).
// /oauth/token (client secret) and the console (its form) take none.
func needsBearer(uri []byte, cfg Config) bool {
	switch {
	case bytes.HasPrefix(uri, []byte("/v1/admin/")):
		return cfg.TLS.Admin.NeedsToken()
	case bytes.HasPrefix(uri, []byte("/v1/sync")):
		return cfg.TLS.Sync.NeedsToken()
	}
	return bytes.HasPrefix(uri, []byte("/v1/"))
}
