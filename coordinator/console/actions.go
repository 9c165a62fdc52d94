package console

// Behavior: the console's actions — POST|PUT /console/api/v1/admin/<path>
// with a session, a same-origin Origin and the session's X-CSRF-Token.
// Only the seven admin routes below are reachable this way; each is served
// by the admin API itself, in-process, and its status and JSON answer go
// back to the page unchanged (so the outcome shown — gateways safe, the
// new epoch, the fenced count — is the admin API's own). Anything else is
// 404. The page asks for confirmation before it sends one.

import (
	"net/url"
	"strings"

	"github.com/valyala/fasthttp"
)

// action is one admin route the console may call; pattern as in routes.go.
type action struct {
	method  string
	pattern []string
}

var actions = []action{
	{fasthttp.MethodPost, []string{"groups", "{}", "partitions", "{}", "{}", "revoke"}}, // revoke a partition
	{fasthttp.MethodPost, []string{"groups", "{}", "partitions", "{}", "{}", "lease"}},  // lease a partition
	{fasthttp.MethodPut, []string{"groups", "{}", "partitions", "{}", "{}", "offset"}},  // reset its committed offset
	{fasthttp.MethodPost, []string{"groups", "{}", "members", "{}", "revoke"}},          // revoke a member
	{fasthttp.MethodPost, []string{"capabilities", "{}", "revoke"}},                     // deny a capability id
	{fasthttp.MethodPut, []string{"qos"}},                                               // set a QoS override
	{fasthttp.MethodPut, []string{"groups", "{}", "config"}},                            // e.g. the creeping rate
}

func allowedAction(method string, segments []string) bool {
	for _, a := range actions {
		if a.method != method {
			continue
		}
		if _, ok := matchSegments(a.pattern, segments); ok {
			return true
		}
	}
	return false
}

func (c *Console) serveAction(ctx *fasthttp.RequestCtx, s *session, params []string) {
	method := string(ctx.Method())
	if !allowedAction(method, params) {
		writeProblem(ctx, fasthttp.StatusNotFound, "not_found", "not a console action")
		return
	}
	escaped := make([]string, len(params))
	for i, p := range params {
		escaped[i] = url.PathEscape(p)
	}
	status, body := c.backend.Admin(s.principal, method, "/v1/admin/"+strings.Join(escaped, "/"), ctx.PostBody())
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(body)
}
