package coordinator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/coordinator/console"
	"github.com/capgate/capgate/identity"
	"github.com/capgate/capgate/ocap"
)

// consoleCaller marks a request the console made in-process for a logged-in
// operator. Only code in this package can set it (an unexported key type):
// nothing from the network can.
type consoleCaller struct{}

// fromConsole reports whether ctx is such a request.
func fromConsole(ctx *fasthttp.RequestCtx) bool {
	return ctx.UserValue(consoleCaller{}) != nil
}

// consoleWho is the audit log's who of a console request: "console", and
// the operator when the session names one ("admin" for the admin token,
// an IdP identity's subject and issuer).
type consoleWho string

func (w consoleWho) String() string {
	if w == "" {
		return "console"
	}
	return "console:" + string(w)
}

// consoleBackend serves the console's reads and actions through the admin
// routes themselves, so the console adds no admin logic of its own.
type consoleBackend struct{ c *Coordinator }

var consoleAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}

// ClientAddr is the console request's client address (trusted_proxies).
func (b consoleBackend) ClientAddr(ctx *fasthttp.RequestCtx) netip.Addr { return b.c.clientAddr(ctx) }

// Admin runs one admin route in-process, as an admin, through the same
// dispatch (and request metrics) as a network request. path is a request
// URI under /v1/admin/; anything else is refused with 404.
func (b consoleBackend) Admin(who, method, path string, body []byte) (int, []byte) {
	const prefix = "/v1/admin/"
	if len(path) <= len(prefix) || path[:len(prefix)] != prefix {
		return fasthttp.StatusNotFound, nil
	}
	var req fasthttp.Request
	req.Header.SetMethod(method)
	req.SetRequestURI(path)
	req.Header.SetContentType("application/json")
	req.SetBody(body)
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, consoleAddr, nil)
	ctx.SetUserValue(consoleCaller{}, consoleWho(who))
	b.c.serve(&ctx)
	return ctx.Response.StatusCode(), append([]byte(nil), ctx.Response.Body()...)
}

// ListPageMax is describe_page_max, the admin lists' largest page.
func (b consoleBackend) ListPageMax() int { return b.c.cfg.DescribePageMax }

// IsAdminToken checks a login token against the admin token hashes (any
// token passes when tls.admin asks for a certificate only).
func (b consoleBackend) IsAdminToken(token []byte) bool {
	return !b.c.cfg.TLS.Admin.NeedsToken() || b.c.adminTokens.matches(token)
}

// IdentityAdmin verifies an IdP token for a console login (oidc issuers'
// console_admins), refusing a denied identity; the session it starts asks
// denied on each request, so a deny ends it. A refusal says why, as a
// join with the token is told (identityClaims).
func (b consoleBackend) IdentityAdmin(token []byte) (string, time.Time, func() bool, error) {
	c := b.c
	if !c.identities.Handles(token) {
		return "", time.Time{}, nil, console.ErrNotIdentityToken
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.OIDC.FetchTimeout)
	defer cancel()
	id, err := c.identities.ConsoleAdmin(ctx, string(token), c.now())
	switch {
	case errors.Is(err, identity.ErrExpired):
		return "", time.Time{}, nil, errors.New("it expired")
	case err != nil:
		return "", time.Time{}, nil, errors.New(identity.Reason(err))
	}
	claims := ocap.Claims{ID: id.ID, Issuer: id.Issuer, Subject: id.Subject}
	denied := func() bool { return c.revocations.refusal(&claims, ocap.KindClient, c.now()) != nil }
	if denied() {
		return "", time.Time{}, nil, fmt.Errorf("its identity %s is denied (capgate admin revoke-capability)", id.ID)
	}
	return id.Subject + " (" + id.Issuer + ")", id.ExpiresAt, denied, nil
}

// AdminCertificate reports whether the connection carries the client
// certificate tls.admin asks for (true when it asks for none).
func (b consoleBackend) AdminCertificate(ctx *fasthttp.RequestCtx) bool {
	ch := b.c.cfg.TLS.Admin
	return !ch.NeedsCertificate() || ch.Allows(ctx.TLSConnectionState())
}

// Serves reports whether a route exists for method and path.
func (b consoleBackend) Serves(method, path string) bool {
	segments := splitPath(path)
	for _, rt := range b.c.routes.routes {
		if _, ok := match(rt.pattern, segments); ok && rt.method == method {
			return true
		}
	}
	return false
}

// newConsole builds the console on the coordinator's timeline feed, its
// metrics (refused logins, the failed-login limiter's addresses) on the
// coordinator's registry.
func (c *Coordinator) newConsole() (*console.Console, error) {
	con, err := console.New(c.cfg.Console, consoleBackend{c}, c.timeline, c.log.Named("console"), c.now)
	if err != nil {
		return nil, err
	}
	con.SetPeers(c.cfg.otherPeers())
	if err := registerAll(c.metrics.registry, con.Collectors()); err != nil {
		return nil, fmt.Errorf("console: metrics: %w", err)
	}
	return con, nil
}

// registerAll registers every collector, stopping at the first error.
func registerAll(r prometheus.Registerer, cs []prometheus.Collector) error {
	for _, col := range cs {
		if err := r.Register(col); err != nil {
			return err
		}
	}
	return nil
}
