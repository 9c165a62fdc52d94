package console

import (
	"github.com/valyala/fasthttp"
)

// access is what a route demands before it runs.
type access uint8

const (
	// public: the login page and the static files (no data in either).
	public access = iota
	// page: a session; without one the browser is sent to the login page.
	page
	// read: a session; without one 401 (fragments, the event stream).
	read
	// change: a session, a same-origin Origin, and the session's CSRF
	// token in X-CSRF-Token (or the csrf form field); else 401 / 403.
	change
)

type route struct {
	name    string
	method  string
	pattern []string // path segments after /console; "{}" matches one, "*" the rest
	access  access
	serve   func(ctx *fasthttp.RequestCtx, s *session, params []string)
}

// routes is the console's route table (one file per concern: pages.go,
// actions.go, stream.go, audit.go, login.go, assets.go).
func (c *Console) routes() []route {
	get, post := fasthttp.MethodGet, fasthttp.MethodPost
	return []route{
		{name: "console_root", method: get, pattern: []string{""}, access: page, serve: c.serveRoot},
		{name: "console_static", method: get, pattern: []string{"static", "{}"}, access: public, serve: serveStatic},
		{name: "console_login_page", method: get, pattern: []string{"login"}, access: public, serve: c.serveLoginPage},
		{name: "console_login", method: post, pattern: []string{"login"}, access: public, serve: c.serveLogin},
		{name: "console_logout", method: post, pattern: []string{"logout"}, access: change, serve: c.serveLogout},
		{name: "console_groups", method: get, pattern: []string{"groups"}, access: page, serve: c.serveGroups},
		{name: "console_group", method: get, pattern: []string{"groups", "{}"}, access: page, serve: c.serveGroup},
		{name: "console_group_live", method: get, pattern: []string{"groups", "{}", "live"}, access: read, serve: c.serveGroupLive},
		{name: "console_timeline", method: get, pattern: []string{"timeline"}, access: page, serve: c.serveTimeline},
		{name: "console_gateways", method: get, pattern: []string{"gateways"}, access: page, serve: c.serveGateways},
		{name: "console_overrides", method: get, pattern: []string{"overrides"}, access: page, serve: c.serveOverrides},
		{name: "console_audit", method: get, pattern: []string{"audit"}, access: page, serve: c.serveAudit},
		{name: "console_events", method: get, pattern: []string{"events"}, access: read, serve: c.serveEvents},
		{name: "console_action", method: post, pattern: []string{"api", "v1", "admin", "*"}, access: change, serve: c.serveAction},
		{name: "console_action", method: fasthttp.MethodPut, pattern: []string{"api", "v1", "admin", "*"}, access: change, serve: c.serveAction},
	}
}

// route finds the route for method and segments. A path that matches with
// another method is "not found" too: the console has no 405 to explain.
func (c *Console) route(method string, segments []string) (route, []string, bool) {
	for _, rt := range c.table {
		if rt.method != method {
			continue
		}
		if params, ok := matchSegments(rt.pattern, segments); ok {
			return rt, params, true
		}
	}
	return route{}, nil, false
}

func matchSegments(pattern, segments []string) ([]string, bool) {
	var params []string
	for i, p := range pattern {
		if p == "*" {
			if i >= len(segments) {
				return nil, false
			}
			return append(params, segments[i:]...), true
		}
		if i >= len(segments) {
			return nil, false
		}
		switch {
		case p == "{}":
			if segments[i] == "" {
				return nil, false
			}
			params = append(params, segments[i])
		case p != segments[i]:
			return nil, false
		}
	}
	return params, len(pattern) == len(segments)
}
