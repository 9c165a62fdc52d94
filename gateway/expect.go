package gateway

import (
	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/internal/bodyheld"
	"github.com/capgate/capgate/internal/linger"
)

// expectContinue is the server's ExpectHandler: a request sent with
// "Expect: 100-continue" is told to send its body only when it could be
// read (redteam6 #9). A POST, PUT or PATCH without a bearer is answered
// 401 at once (every route that takes a body needs a capability), and
// one whose Content-Length is over its cap (preauth.go: max_body_bytes
// for a produce bearing a capability with the produce op, 4 KiB
// otherwise) as a body over the cap is (413, or 503 not_ready before the
// first sync) — without "100 Continue", so the client never sends the
// body; so is any other method's (a GET announcing a body it does not
// need, redteam7 #7). fasthttp closes the connection after either answer; it lingers
// (internal/linger) for a client that sends the body anyway.
func (g *Gateway) expectContinue(ctx *fasthttp.RequestCtx) int {
	h := &ctx.Request.Header
	if why := g.bodies.Refused(h); why != bodyheld.None {
		// Over the bodies held (bodyheld.go): refused before the body
		// is sent. No handler runs after a refusal here: released now.
		g.bodies.Release(h)
		linger.OnClose(ctx)
		g.answerBodyRefused(ctx, why)
		return ctx.Response.StatusCode()
	}
	if token, _ := bearerToken(h); len(token) == 0 && (h.IsPost() || h.IsPut() || h.IsPatch()) {
		g.bodies.Release(h)
		linger.OnClose(ctx)
		writeError(ctx, api.CodeUnauthorized, "bearer capability required (refused before 100 Continue: the body is not read)", nil)
		g.metrics.rejected(api.CodeUnauthorized)
		return ctx.Response.StatusCode()
	}
	if h.ContentLength() > g.bodyLimit(h) {
		g.bodies.Release(h)
		g.handleServerError(ctx, fasthttp.ErrBodyTooLarge)
		return ctx.Response.StatusCode()
	}
	return fasthttp.StatusContinue
}
