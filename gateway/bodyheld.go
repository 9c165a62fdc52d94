package gateway

// Behavior: the request bodies a gateway reads at once are bounded
// (internal/bodyheld): a body over preauthBodyBytes, whose bearer may
// produce (preauth.go), is counted from its headers — its Content-Length,
// or max_body_bytes for a chunked one — until its handler has answered
// or its read failed: max_body_bytes_held in all (503 overloaded beyond,
// Retry-After: try another gateway) and max_body_bytes_held_per_holder
// per holder (the chain root; a client credential's jti: 429
// too_many_fetches beyond). Over either the body is not read — answered
// at once (with "Expect: 100-continue", before it is sent), the
// connection lingering for a client that sends it anyway
// (internal/linger), as a body over its cap is. Before, one producing
// credential sending only the headers of 4 MiB produces on 2,000
// connections from one address made the gateway allocate 8 GiB
// (redteam10 #4).

import (
	"time"

	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/internal/bodyheld"
)

// answerBodyRefused answers a request whose body did not fit the bytes
// held, for why.
func (g *Gateway) answerBodyRefused(ctx *fasthttp.RequestCtx, why bodyheld.Refusal) {
	setRetryAfter(ctx, time.Second)
	if why == bodyheld.OverAll {
		writeError(ctx, api.CodeOverloaded, "the gateway holds as many request bodies as it may (max_body_bytes_held); the body was not read: try another gateway or again",
			map[string]any{"max_body_bytes_held": g.cfg.MaxBodyBytesHeld})
		g.metrics.rejected(api.CodeOverloaded)
		return
	}
	writeError(ctx, api.CodeTooManyFetches, "this holder's request bodies the gateway is reading take as many bytes as they may (max_body_bytes_held_per_holder); the body was not read: wait for one to finish",
		map[string]any{"max_body_bytes_held_per_holder": g.cfg.MaxBodyBytesHeldPerHolder})
	g.metrics.rejected(api.CodeTooManyFetches)
}
