package gateway

import (
	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
)

// consumer wraps a record route with tls.consumers: when it asks for a
// client certificate, a connection without a verified one whose names
// match answers 403 client_certificate_required before the capability
// is looked at.
func (g *Gateway) consumer(h func(*fasthttp.RequestCtx, routeParams)) func(*fasthttp.RequestCtx, routeParams) {
	ch := g.cfg.TLS.Consumers
	if !ch.NeedsCertificate() {
		return h
	}
	return func(ctx *fasthttp.RequestCtx, p routeParams) {
		if !ch.Allows(ctx.TLSConnectionState()) {
			writeError(ctx, api.CodeClientCertificateRequired, "record routes need a client certificate signed by the client CA with an allowed name", nil)
			g.metrics.rejected(api.CodeClientCertificateRequired)
			return
		}
		h(ctx, p)
	}
}
