package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/internal/linger"
)

// route is one method and path of the gateway. The names are the
// operationIds of api/openapi.yaml: a test walks this table against the
// document, so a route added here must be documented there.
type route struct {
	name    string
	method  string
	path    string   // OpenAPI path template, e.g. /v1/topics/{topic}/partitions/{partition}/records
	pattern []string // path segments; "" where the template has a parameter
	handle  func(ctx *fasthttp.RequestCtx, params routeParams)
}

// routeParams are the path parameters of a match, in order (slices of
// the request path, still to be validated).
type routeParams [2][]byte

// newRoutes is the gateway's route table (DESIGN §5). Anything else is 404,
// a known path with another method 405 with Allow.
func (g *Gateway) newRoutes() []route {
	get, head, post := fasthttp.MethodGet, fasthttp.MethodHead, fasthttp.MethodPost
	health := func(ctx *fasthttp.RequestCtx, _ routeParams) { g.handleHealth(ctx) }
	ready := func(ctx *fasthttp.RequestCtx, _ routeParams) { g.handleReady(ctx) }
	records := "/v1/topics/{topic}/partitions/{partition}/records"
	table := []route{
		{name: "healthz", method: get, path: "/healthz", handle: health},
		{name: "healthz_head", method: head, path: "/healthz", handle: health},
		{name: "readyz", method: get, path: "/readyz", handle: ready},
		{name: "readyz_head", method: head, path: "/readyz", handle: ready},
		{name: "metrics", method: get, path: "/metrics", handle: func(ctx *fasthttp.RequestCtx, _ routeParams) { g.handleMetrics(ctx) }},
		{name: "openapi", method: get, path: "/openapi.json", handle: func(ctx *fasthttp.RequestCtx, _ routeParams) { serveOpenAPI(ctx) }},
		{name: "fetch_records", method: get, path: records, handle: g.consumer(func(ctx *fasthttp.RequestCtx, p routeParams) { g.fetchRecords(ctx, p[0], p[1]) })},
		{name: "produce_records", method: post, path: records, handle: g.consumer(func(ctx *fasthttp.RequestCtx, p routeParams) { g.produceRecords(ctx, p[0], p[1]) })},
		{name: "produce_topic_records", method: post, path: "/v1/topics/{topic}/records", handle: g.consumer(func(ctx *fasthttp.RequestCtx, p routeParams) { g.produceTopicRecords(ctx, p[0]) })},
	}
	for i := range table {
		for _, seg := range strings.Split(strings.TrimPrefix(table[i].path, "/"), "/") {
			if strings.HasPrefix(seg, "{") {
				seg = ""
			}
			table[i].pattern = append(table[i].pattern, seg)
		}
	}
	return table
}

func (g *Gateway) handle(ctx *fasthttp.RequestCtx) {
	if problem := api.CountFramingHeaders(ctx.Request.Header.RawHeaders()).Problem(); problem != "" {
		ctx.SetConnectionClose()
		writeError(ctx, api.CodeBadRequest, problem, nil)
		g.metrics.rejected(api.CodeBadRequest)
		return
	}
	if api.FoldedHeaders(ctx.Request.Header.RawHeaders()) {
		ctx.SetConnectionClose()
		writeError(ctx, api.CodeBadRequest, "folded header lines (obs-fold) are refused", nil)
		g.metrics.rejected(api.CodeBadRequest)
		return
	}
	path, method := ctx.Path(), ctx.Method()
	var params routeParams
	matched := false
	for i := range g.routes {
		rt := &g.routes[i]
		if !matchPath(rt.pattern, path, &params) {
			continue
		}
		if string(method) == rt.method {
			rt.handle(ctx, params)
			return
		}
		matched = true
	}
	if matched {
		g.methodNotAllowed(ctx, path)
		return
	}
	writeError(ctx, api.CodeNotFound, noRoute(path), nil)
	g.metrics.rejected(api.CodeNotFound)
}

// noRoute is a 404's message: the path asked for (at most 128 bytes, no
// query: tokens never reach a message) and what a gateway serves, since
// the usual cause is a base URL with a path or a coordinator's route.
func noRoute(path []byte) string {
	if api.TopicDetailsPath(path) {
		return fmt.Sprintf("no such route: %.128q; %s", path, api.TopicDetailsHint)
	}
	if coordinatorRoute(path) {
		return fmt.Sprintf("no such route: %.128q; this is the coordinator's (the console, groups, admin, OAuth, keys), not a gateway's: open it at the coordinator's base URL, the one in this gateway's coordinator_url", path)
	}
	return fmt.Sprintf("no such route: %.128q; a gateway serves /v1/topics/{topic}/partitions/{partition}/records (GET fetch, POST produce), /v1/topics/{topic}/records (POST produce, the gateway placing records), /healthz, /readyz, /metrics and /openapi.json: is the URL a gateway's base URL?", path)
}

// coordinatorPrefixes begin the coordinator's routes, which a new user
// opened at the gateway (its /console in a browser: a 404 listing the
// gateway's routes, newuser7).
var coordinatorPrefixes = []string{"/console", "/v1/groups", "/v1/admin/", "/v1/sync", "/v1/capabilities/", "/oauth/", "/.well-known/"}

// coordinatorRoute reports whether path is one of the coordinator's.
// The coordinator's URL is not told: it may be an internal name.
func coordinatorRoute(path []byte) bool {
	for _, prefix := range coordinatorPrefixes {
		if rest, ok := bytes.CutPrefix(path, []byte(prefix)); ok && (len(rest) == 0 || rest[0] == '/' || strings.HasSuffix(prefix, "/")) {
			return true
		}
	}
	return false
}

// methodNotAllowed answers 405 with the methods path allows.
func (g *Gateway) methodNotAllowed(ctx *fasthttp.RequestCtx, path []byte) {
	var allow []string
	var params routeParams
	for i := range g.routes {
		if matchPath(g.routes[i].pattern, path, &params) {
			allow = append(allow, g.routes[i].method)
		}
	}
	list := strings.Join(allow, ", ")
	ctx.Response.Header.Set(fasthttp.HeaderAllow, list)
	writeError(ctx, api.CodeMethodNotAllowed, "method not allowed; allowed: "+list, nil)
	g.metrics.rejected(api.CodeMethodNotAllowed)
}

// matchPath matches path against pattern's segments without allocating;
// a parameter segment matches any non-empty segment and is stored in
// params in order.
func matchPath(pattern []string, path []byte, params *routeParams) bool {
	rest, ok := bytes.CutPrefix(path, []byte("/"))
	if !ok {
		return false
	}
	n := 0
	for i, want := range pattern {
		seg := rest
		if j := bytes.IndexByte(rest, '/'); j >= 0 {
			seg, rest = rest[:j], rest[j+1:]
		} else {
			rest = nil
		}
		last := i == len(pattern)-1
		if last != (rest == nil) {
			return false
		}
		switch {
		case want != "":
			if string(seg) != want {
				return false
			}
		case len(seg) == 0 || n == len(params):
			return false
		default:
			params[n] = seg
			n++
		}
	}
	return true
}

// handleServerError answers what fasthttp could not parse: oversize
// headers (431), oversize bodies (413), timeouts and malformed requests
// (400). fasthttp closes the connection afterwards.
func (g *Gateway) handleServerError(ctx *fasthttp.RequestCtx, err error) {
	var small *fasthttp.ErrSmallBuffer
	var netErr net.Error
	code, message := api.CodeBadRequest, "malformed request"
	var details map[string]any
	switch {
	case errors.As(err, &small):
		code, message = api.CodeHeadersTooLarge, "request headers larger than gateway.max_header_bytes (a bearer token counts against it)"
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		// Which cap applied is not known here, so name both
		// (preauth.go); a producer's token the cap was decided without
		// is checked now (checkedTooLate).
		code = api.CodeBodyTooLarge
		message = fmt.Sprintf("request body too large: a produce bearing a valid capability with the produce op, or a client credential that may produce, may send max_body_bytes (%d bytes); any other request %d bytes",
			g.cfg.MaxBodyBytes, preauthBodyBytes)
		details = map[string]any{"max_body_bytes": g.cfg.MaxBodyBytes, "preauth_body_bytes": preauthBodyBytes}
	case errors.As(err, &netErr) && netErr.Timeout():
		// No whole request within read_timeout: an idle pre-dialed
		// connection or slow headers. Close without an answer: a client
		// would read a response to a request it never sent.
		ctx.Conn().Close()
		g.metrics.rejected(code)
		return
	}
	linger.OnClose(ctx) // the rest of the request is still coming (internal/linger)
	if code == api.CodeBodyTooLarge && g.verifier.Load() == nil {
		// Before the first sync no capability verifies, so every body
		// got the small cap: answer what a small one gets (503
		// not_ready, retriable), not a 413 a producer takes as final.
		setRetryAfter(ctx, time.Second)
		writeError(ctx, api.CodeNotReady, "gateway has not synced with the coordinator yet", nil)
		g.metrics.rejected(api.CodeNotReady)
		return
	}
	if code == api.CodeBodyTooLarge && g.checkedTooLate(ctx) {
		return
	}
	writeError(ctx, code, message, details)
	g.metrics.rejected(code)
}
