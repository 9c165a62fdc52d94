package console

import (
	"fmt"
	"html/template"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/timeline"
)

// Backend is what the console needs from the coordinator. The console
// reads and acts only through the admin API, served in-process: it holds
// no admin rule of its own.
type Backend interface {
	// Admin serves one admin API request (a path under /v1/admin/) as an
	// authenticated admin and returns its status and JSON body; who is the
	// session's principal, for the audit log ("" for reads).
	Admin(who, method, path string, body []byte) (status int, response []byte)
	// IdentityAdmin verifies token as a JWT of a configured OIDC issuer
	// whose claims match the issuer's console_admins, and not denied: nil
	// with who (issuer and subject, for the page), when the token expires
	// (the session never outlives it), and denied, which reports whether
	// the identity has been denied since (the session then ends at once).
	// A token that names no configured issuer is ErrNotIdentityToken; any
	// other error is why a configured issuer's token was refused, shown on
	// the login form (the same reason a join with it is told).
	IdentityAdmin(token []byte) (who string, expires time.Time, denied func() bool, err error)
	// IsAdminToken reports whether token is an admin token (constant
	// time, against the stored hashes).
	IsAdminToken(token []byte) bool
	// AdminCertificate reports whether the request's connection carries
	// the client certificate the admin routes ask for (true when they ask
	// for none): the console asks for it on every request, login included.
	AdminCertificate(ctx *fasthttp.RequestCtx) bool
	// ListPageMax is the most groups one admin list page may be asked
	// for (describe_page_max): the groups page asks for its own page
	// size and one more, within it.
	ListPageMax() int
	// Serves reports whether the coordinator has a route for method and
	// path: the audit log view shows only when GET /v1/admin/audit exists.
	Serves(method, path string) bool
	// ClientAddr is the address a request comes from (the connection's,
	// or behind the coordinator's trusted_proxies the client
	// X-Forwarded-For names): the key of the login limiter and the
	// address its warnings name.
	ClientAddr(ctx *fasthttp.RequestCtx) netip.Addr
}

// Prefix is the path the console is served under.
const Prefix = "/console"

// Owns reports whether path belongs to the console.
func Owns(path []byte) bool {
	return len(path) >= len(Prefix) && string(path[:len(Prefix)]) == Prefix &&
		(len(path) == len(Prefix) || path[len(Prefix)] == '/')
}

// Console serves the operator's console. Safe for concurrent use.
type Console struct {
	cfg      Config
	backend  Backend
	feed     *timeline.Feed
	log      *zap.Logger
	now      func() time.Time
	sessions *sessions
	pages    map[string]*template.Template
	audit    bool // GET /v1/admin/audit exists
	table    []route
	// started is when this Console began serving: its coordinator's
	// start or, with replicas, its takeover. The timeline and the audit
	// log are kept in memory from then (the pages say so).
	started time.Time
	// peers are the other replicas' origins, space-separated
	// (replica.peers): a page offers them when this replica stops
	// answering. Set before serving (SetPeers).
	peers string

	closing   chan struct{}
	closeOnce sync.Once
	loggedAt  atomic.Int64 // unix ms of the last refused-login log line
	limitedAt atomic.Int64 // unix ms of the last rate-limited-login log line

	logins   *loginLimiter
	refusals *prometheus.CounterVec // refused logins by reason
}

// New builds the console. now is the coordinator's clock.
func New(cfg Config, b Backend, feed *timeline.Feed, log *zap.Logger, now func() time.Time) (*Console, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	pages, err := parsePages()
	if err != nil {
		return nil, fmt.Errorf("console: templates: %w", err)
	}
	c := &Console{
		cfg: cfg, backend: b, feed: feed, log: log, now: now,
		sessions: newSessions(cfg.MaxSessions, cfg.SessionTTL, now),
		pages:    pages,
		audit:    b.Serves(fasthttp.MethodGet, auditPath),
		closing:  make(chan struct{}),
		logins:   newLoginLimiter(cfg.LoginMaxFailures, cfg.LoginFailureWindow, cfg.LoginLimiterEntries),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capgate_coordinator_console_login_refusals_total",
			Help: "Console logins refused, by reason: cross_origin, login_token (a stale or forged login form), wrong_token, rate_limited (too many failed logins from the address, or the limiter's table full).",
		}, []string{"reason"}),
	}
	for _, reason := range loginRefusals {
		c.refusals.WithLabelValues(reason)
	}
	c.table = c.routes()
	c.started = now()
	return c, nil
}

// SetPeers names the other replicas' origins (http(s)://host[:port],
// from the coordinator's replica.peers — never from a request): a page
// left open at this replica links to them once it stops answering. Call
// it before the console serves.
func (c *Console) SetPeers(origins []string) { c.peers = strings.Join(origins, " ") }

// Collectors are the console's metrics, for the coordinator's registry.
func (c *Console) Collectors() []prometheus.Collector {
	return []prometheus.Collector{c.refusals, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "capgate_coordinator_console_login_addresses",
		Help: "Client addresses the console's failed-login limiter tracks (at most console.login_limiter_entries).",
	}, func() float64 { return float64(c.logins.tracked()) })}
}

// Close ends every live stream (the coordinator calls it before its HTTP
// server shuts down, which waits for open responses).
func (c *Console) Close() {
	c.closeOnce.Do(func() { close(c.closing) })
}

// Serve answers one request under Prefix and returns a route name for the
// request metrics.
func (c *Console) Serve(ctx *fasthttp.RequestCtx) string {
	securityHeaders(ctx)
	if !c.cfg.Enabled {
		c.problem(ctx, fasthttp.StatusNotFound, "not_found", "the console is disabled (coordinator.console.enabled)")
		return "console_disabled"
	}
	rest := strings.TrimPrefix(string(ctx.Path()), Prefix)
	segments := strings.Split(strings.Trim(rest, "/"), "/")
	rt, params, ok := c.route(string(ctx.Method()), segments)
	if !ok {
		c.problem(ctx, fasthttp.StatusNotFound, "not_found", fmt.Sprintf("no such console page: %s %.200q", ctx.Method(), ctx.Path()))
		return "console_not_found"
	}
	if rt.access != public || rt.name == "console_login" {
		if !c.backend.AdminCertificate(ctx) {
			c.problem(ctx, fasthttp.StatusForbidden, "client_certificate_required", "the console needs the admin client certificate")
			return rt.name
		}
	}
	if rt.access == public {
		rt.serve(ctx, nil, params)
		return rt.name
	}
	sess, ok := c.guard(ctx, rt)
	if ok {
		rt.serve(ctx, sess, params)
	}
	return rt.name
}

// problem answers a refusal that comes before any route runs: the Problem
// page to a browser's navigation (a GET whose Accept prefers text/html to
// JSON: api.Negotiate, ties going to JSON), else the JSON error body —
// to curl (*/*), to a client asking for JSON, to the page's own fetches.
// The page is rendered without the session (no navigation, no CSRF
// token): nothing of a session is shown before its checks ran.
func (c *Console) problem(ctx *fasthttp.RequestCtx, status int, code, message string) {
	if !ctx.IsGet() && !ctx.IsHead() {
		writeProblem(ctx, status, code, message)
		return
	}
	if media, ok := api.Negotiate(ctx.Request.Header.Peek(fasthttp.HeaderAccept), api.MediaJSON, mediaHTML); !ok || media != mediaHTML {
		writeProblem(ctx, status, code, message)
		return
	}
	c.render(ctx, status, "problem", pageData{Title: "Problem", Body: message})
}

const mediaHTML = "text/html"
