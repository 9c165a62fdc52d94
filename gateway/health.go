package gateway

// Behavior: GET|HEAD /healthz answers 200 {"status":"ok"} whenever the
// process serves HTTP. GET|HEAD /readyz answers 200 {"status":"ready",
// "seq":N} once the first sync has been applied and while the gateway is in
// sync; 503 not_ready before the first sync and 503 out_of_sync while
// self-fenced (no good sync for sync_timeout), with Retry-After: 1 — the
// same refusals fetch and produce get. Neither needs a token.

import (
	"strconv"
	"time"

	"github.com/valyala/fasthttp"
)

func (g *Gateway) handleHealth(ctx *fasthttp.RequestCtx) {
	writeJSONBody(ctx, []byte(`{"status":"ok"}`))
}

func (g *Gateway) handleReady(ctx *fasthttp.RequestCtx) {
	if g.refuseUnsynced(ctx, time.Now()) != "" {
		return
	}
	writeJSONBody(ctx, strconv.AppendUint([]byte(`{"status":"ready","seq":`), g.view.Seq(), 10))
	ctx.Response.AppendBodyString("}")
}
