package gateway

// Behavior: the media type of an answer follows the request's Accept
// header (api.Negotiate, RFC 9110 §12.5.1). The fetch route answers
// application/json (the default) or application/vnd.kafka.record-batch;
// every other route but /metrics answers application/json only (/metrics
// is Prometheus' text, negotiated by the Prometheus handler, never 406).
// A q=0 refuses a type; media types match case-insensitively; on equal q
// the type the client named wins over one it reached with a wildcard,
// then JSON. A request whose Accept refuses every type its route answers
// in is 406 not_acceptable naming them (details.available); the error
// body itself is JSON whatever Accept says, as every error of the
// gateway. Routing comes first (404, 405), and a request the header-line
// checks refuse (router.go: 400, connection closed) gets that 400 rather
// than a 406. Negotiation precedes authentication.
//
// Negotiation leaves its verdict in the header: a request negotiated to
// record batches carries exactly that type as its Accept when the
// handler runs (the SDK sends it so, and anything else that negotiates
// to it is rewritten), and the fetch handler answers raw batches for
// exactly that Accept (records_fetch.go, acceptsRecordBatch) — one
// decision, never a second reading of the header.

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
)

var (
	answersJSON    = []string{api.MediaJSON}
	answersRecords = []string{api.MediaJSON, api.MediaRecordBatch}
)

// serve is the server's Handler: negotiation, then the router.
func (g *Gateway) serve(ctx *fasthttp.RequestCtx) {
	g.bodies.Handling(&ctx.Request.Header) // its body, if counted, is released below (bodyheld.go)
	if g.negotiate(ctx) {
		g.handle(ctx)
	}
	g.bodies.Release(&ctx.Request.Header)
}

// negotiate settles the answer's media type; false when it answered 406.
func (g *Gateway) negotiate(ctx *fasthttp.RequestCtx) bool {
	accept := ctx.Request.Header.Peek(fasthttp.HeaderAccept)
	if len(accept) == 0 || string(accept) == "*/*" || string(accept) == api.MediaJSON {
		return true // every negotiated route answers JSON
	}
	if string(accept) == api.MediaRecordBatch && ctx.IsGet() && bytes.HasSuffix(ctx.Path(), []byte("/records")) {
		// The SDK's raw fetch, the hot path: either the fetch route, which
		// answers record batches, or no route (the router's 404/405) —
		// no second route match per fetch.
		return true
	}
	offers := g.answerTypes(ctx.Path(), ctx.Method())
	if offers == nil {
		return true
	}
	media, ok := api.Negotiate(accept, offers...)
	if !ok {
		raw := ctx.Request.Header.RawHeaders()
		if api.CountFramingHeaders(raw).Problem() != "" || api.FoldedHeaders(raw) {
			return true // the router refuses it (400) and closes the connection
		}
		writeError(ctx, api.CodeNotAcceptable, fmt.Sprintf("Accept %.128q refuses every type this route answers in: %s (q=0 refuses a type)",
			accept, strings.Join(offers, ", ")), map[string]any{"available": offers})
		g.metrics.rejected(api.CodeNotAcceptable)
		return false
	}
	if media == api.MediaRecordBatch && string(accept) != media {
		ctx.Request.Header.Set(fasthttp.HeaderAccept, media) // the verdict the fetch handler reads
	}
	return true
}

// answerTypes are the media types the route of path and method answers
// in, the gateway's preference first; nil for no route (the router
// answers 404 or 405) and for /metrics.
func (g *Gateway) answerTypes(path, method []byte) []string {
	var params routeParams
	for i := range g.routes {
		rt := &g.routes[i]
		if string(method) != rt.method || !matchPath(rt.pattern, path, &params) {
			continue
		}
		switch rt.name {
		case "metrics":
			return nil
		case "fetch_records":
			return answersRecords
		}
		return answersJSON
	}
	return nil
}
