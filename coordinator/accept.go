package coordinator

// Behavior: every route of the coordinator's API (/v1/…, /oauth/token,
// /.well-known/jwks.json, /healthz, /readyz, /openapi.json) answers
// application/json, and only that; a request whose Accept header refuses
// it (api.Negotiate, RFC 9110 §12.5.1: "text/html" alone,
// "application/json;q=0", "*/*;q=0"; media types matched
// case-insensitively) is 406 not_acceptable with details.available —
// the error body itself JSON, as every error. Routing comes first (404,
// 405), and the header-line checks (400, server.go) before that. Not
// negotiated: /metrics (Prometheus' text, its handler negotiates) and the
// console (HTML for browsers).

import (
	"fmt"

	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
)

var answersJSON = []string{api.MediaJSON}

// acceptable reports whether ctx's Accept header takes the JSON its route
// answers with; when not, it has answered 406.
func (c *Coordinator) acceptable(ctx *fasthttp.RequestCtx) bool {
	accept := ctx.Request.Header.Peek(fasthttp.HeaderAccept)
	if len(accept) == 0 || string(accept) == "*/*" || string(accept) == api.MediaJSON {
		return true
	}
	if name := c.routes.nameOf(ctx); name == "" || name == "metrics" {
		return true // the router answers 404 or 405; Prometheus negotiates
	}
	if _, ok := api.Negotiate(accept, answersJSON...); ok {
		return true
	}
	writeErrorDetails(ctx, api.CodeNotAcceptable, fmt.Sprintf("Accept %.128q refuses %s, the only type this route answers in (q=0 refuses a type)",
		accept, api.MediaJSON), map[string]any{"available": answersJSON})
	return false
}

// nameOf is the name of the route ctx's path and method match, or "".
func (r *router) nameOf(ctx *fasthttp.RequestCtx) string {
	segments := splitPath(string(ctx.Path()))
	for i := range r.routes {
		if rt := &r.routes[i]; rt.method == string(ctx.Method()) {
			if _, ok := match(rt.pattern, segments); ok {
				return rt.name
			}
		}
	}
	return ""
}
