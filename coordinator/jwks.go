package coordinator

// Behavior: GET /.well-known/jwks.json — public, no auth: the public
// halves of the signing key ring (current, next, previous) as an RFC 7517
// key set (api.JWKS). Gateways get the same set on the sync channel; this
// route is for tools and third parties that verify capabilities.

import (
	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
)

func (c *Coordinator) handleJWKS(ctx *fasthttp.RequestCtx, _ []string) {
	ctx.Response.Header.Set("Cache-Control", "public, max-age=30")
	writeJSON(ctx, fasthttp.StatusOK, api.JWKS{Keys: c.keys.publicKeys()})
}
