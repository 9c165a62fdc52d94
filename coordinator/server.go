package coordinator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/console"
	"github.com/capgate/capgate/coordinator/group"
	"github.com/capgate/capgate/internal/bodyheld"
	"github.com/capgate/capgate/internal/connguard"
	"github.com/capgate/capgate/internal/crlf"
	"github.com/capgate/capgate/internal/linger"
	"github.com/capgate/capgate/ocap"
)

// newServer builds the fasthttp server with the configured limits. Errors
// fasthttp finds before a handler runs (body or headers too large,
// unparsable requests) get JSON bodies too.
func (c *Coordinator) newServer() *fasthttp.Server {
	s := newHTTPServer(c.cfg, c.log, c.serve, c.serveError)
	s.HeaderReceived = c.requestConfig
	s.ExpectHandler = func(ctx *fasthttp.RequestCtx) int { return expectContinue(ctx, c.cfg, c.expectLimit, c.serveError) } // listener.go
	return s
}

// newHTTPServer is the coordinator's fasthttp server (also a replica's).
// Until its HeaderReceived is set, every request's body is capped at
// preauthBodyBytes.
func newHTTPServer(cfg Config, log *zap.Logger, handler fasthttp.RequestHandler, onError func(*fasthttp.RequestCtx, error)) *fasthttp.Server {
	return &fasthttp.Server{
		Handler:      handler,
		ErrorHandler: onError,
		HeaderReceived: func(*fasthttp.RequestHeader) fasthttp.RequestConfig {
			return fasthttp.RequestConfig{MaxRequestBodySize: preauthBodyBytes}
		},
		Name:                  "capgate-coordinator",
		MaxRequestBodySize:    cfg.MaxBodyBytes,
		ReadBufferSize:        cfg.MaxHeaderBytes,
		ReadTimeout:           cfg.ReadTimeout,
		WriteTimeout:          cfg.WriteTimeout,
		IdleTimeout:           cfg.IdleTimeout,
		Concurrency:           connguard.Concurrency(cfg.MaxConnections), // bounded below by the listener (listener.go)
		ConnState:             connguard.ConnState,                       // idle connections marked: they give way under pressure (listener.go)
		CloseOnShutdown:       true,
		NoDefaultContentType:  true,
		Logger:                fasthttpLogger{log},
		SecureErrorLogMessage: true,
	}
}

// Request bodies before authentication. fasthttp reads a request's body
// whole — a Content-Length body allocated at its announced size — before
// any handler looks at the bearer, so how much of it is read is decided
// from the headers (HeaderReceived): max_body_bytes for a POST, PUT or
// PATCH whose bearer is a token this coordinator knows (an admin or sync
// token, a client credential, member token or capability that verifies,
// an IdP token that verifies), consoleBodyBytes under /console (the login
// form carries its token in the body; the console's own checks follow),
// preauthBodyBytes for anything else (no or unknown bearer, Basic, GET,
// HEAD, DELETE). Over its cap a request is answered 413 body_too_large
// naming both caps (at a standby replica, which reads no large body, 421
// not_leader as any request there), and the connection lingers
// (internal/linger). Without
// this, an unauthenticated client made the coordinator hold up to
// max_body_bytes × max_connections (1 MiB × 10,000 by default).
const (
	// preauthBodyBytes is the body of a request without a known bearer.
	preauthBodyBytes = 4 << 10
	// consoleBodyBytes is the body of a console request: the login form's
	// token (at most 16 KiB, console's maxTokenBytes) and its fields.
	consoleBodyBytes = 20 << 10
)

// requestConfig is the server's HeaderReceived: the body cap of a
// request, and a body over preauthBodyBytes of a tenant's token counted
// among the bodies held (internal/bodyheld) — over their caps it gets
// the small cap, and serveError the refusal recorded for it. Before, any
// tenant's credential sending only the headers of 1 MiB bodies made the
// coordinator allocate each at once: 300 connections, 307 MiB;
// max_connections_per_address 1,000: 1 GiB (redteam10 #5).
func (c *Coordinator) requestConfig(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	limit, holder := c.bodyGrant(h)
	if holder != "" {
		limit = c.bodies.Cap(h, holder, limit, min(preauthBodyBytes, c.cfg.MaxBodyBytes), c.now())
	}
	return fasthttp.RequestConfig{MaxRequestBodySize: limit}
}

// expectLimit is the ExpectHandler's cap: the small one for a body the
// bodies held refused (its answer is that refusal: serveError).
func (c *Coordinator) expectLimit(h *fasthttp.RequestHeader) int {
	if c.bodies.Refused(h) != bodyheld.None {
		return min(preauthBodyBytes, c.cfg.MaxBodyBytes)
	}
	return c.bodyLimit(h)
}

// bodyRefused answers a request whose body the bodies held refused
// (requestConfig) — 503 overloaded in all, 429 rate_limited for its
// holder, Retry-After — and ends its hold; false for any other.
func (c *Coordinator) bodyRefused(ctx *fasthttp.RequestCtx, err error) bool {
	why := c.bodies.Release(&ctx.Request.Header)
	if why == bodyheld.None || !errors.Is(err, fasthttp.ErrBodyTooLarge) {
		return false
	}
	linger.OnClose(ctx)
	ctx.Response.Header.Set(fasthttp.HeaderRetryAfter, "1")
	if why == bodyheld.OverAll {
		writeErrorDetails(ctx, api.CodeOverloaded, "the coordinator holds as many request bodies as it may (max_body_bytes_held); the body was not read: try again",
			map[string]any{"max_body_bytes_held": c.cfg.MaxBodyBytesHeld})
		return true
	}
	writeErrorDetails(ctx, api.CodeRateLimited, "this holder's request bodies the coordinator is reading take as many bytes as they may (max_body_bytes_held_per_holder); the body was not read: wait for one to finish",
		map[string]any{"max_body_bytes_held_per_holder": c.cfg.MaxBodyBytesHeldPerHolder})
	return true
}

// requestConfig is a replica's HeaderReceived: the serving coordinator's
// caps while it leads; a standby reads no large body (it answers 421).
func (r *Replica) requestConfig(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	if v := r.view.Load(); v.active != nil {
		return v.active.requestConfig(h)
	}
	return fasthttp.RequestConfig{MaxRequestBodySize: preauthBodyBytes}
}

// standbyBodyTooLarge answers a body over the standby's small cap as the
// standby answers every request it does not serve — 421 not_leader
// naming the leader, which clients follow — rather than 413, which they
// take as final; false when the replica is serving or err is another.
func (r *Replica) standbyBodyTooLarge(ctx *fasthttp.RequestCtx, err error) bool {
	v := r.view.Load()
	if v.active != nil || !errors.Is(err, fasthttp.ErrBodyTooLarge) {
		return false
	}
	linger.OnClose(ctx) // the rest of the request is still coming
	writeNotLeader(ctx, v.hint.URL, r.notLeaderMessage(v))
	return true
}

// notLeaderMessage is a standby's 421 message.
func (r *Replica) notLeaderMessage(v *replicaView) string {
	message := fmt.Sprintf("replica %s does not lead (%s)", r.ID(), v.role)
	if v.hint.URL == "" {
		message += "; no leader known yet: retry another coordinator"
	}
	return message
}

func (c *Coordinator) bodyLimit(h *fasthttp.RequestHeader) int {
	limit, _ := c.bodyGrant(h)
	return limit
}

// bodyGrant is bodyLimit and the holder a max_body_bytes body counts
// for among the bodies held: "" for the operator's (an admin or sync
// token, an admin route behind a client certificate) and for the small
// caps.
func (c *Coordinator) bodyGrant(h *fasthttp.RequestHeader) (int, string) {
	small := min(preauthBodyBytes, c.cfg.MaxBodyBytes)
	if h.ContentLength() == 0 || !(h.IsPost() || h.IsPut() || h.IsPatch()) {
		return small, ""
	}
	if n := h.ContentLength(); n > 0 && n <= small {
		return small, "" // fits the small cap: no token to check here (the handler checks it, within its client's budget)
	}
	if path, _, _ := bytes.Cut(h.RequestURI(), []byte("?")); console.Owns(path) {
		return min(consoleBodyBytes, c.cfg.MaxBodyBytes), ""
	}
	if uri := h.RequestURI(); !c.cfg.TLS.Admin.NeedsToken() && bytes.HasPrefix(uri, []byte("/v1/admin/")) &&
		!bytes.Contains(uri, []byte("..")) && !bytes.Contains(uri, []byte("%")) {
		// A client certificate alone makes an admin, and the certificate
		// is not known here: admin routes keep max_body_bytes (a path
		// that dot segments or escapes could lead elsewhere does not).
		return c.cfg.MaxBodyBytes, ""
	}
	if known, holder := c.knownBearer(bearerOf(h)); known {
		return c.cfg.MaxBodyBytes, holder
	}
	return small, ""
}

// knownBearer reports whether token is one this coordinator would accept
// on some route: an admin or sync token (holder ""), a capgate token that
// verifies, an IdP token that verifies (deny-lists and routes are checked
// later), with the holder its bodies count for (bodyHolder).
func (c *Coordinator) knownBearer(token []byte) (bool, string) {
	switch {
	case len(token) == 0:
		return false, ""
	case c.adminTokens.matches(token) || c.syncTokens.matches(token):
		return true, ""
	}
	// The client's address is not known here (fasthttp hands
	// HeaderReceived the headers alone): failed checks are budgeted under
	// the zero address, one budget for every pre-auth check of a body
	// over the small cap. Under a flood of forged tokens on large bodies,
	// a large body whose token was never verified before gets the small
	// cap; serveError then checks a capgate token on its client's own
	// budget and answers 429, send it again (checkedTooLate); verified
	// tokens never get the small cap.
	preauth := budget{preauth: true}
	now := c.now()
	if c.identities.Handles(token) {
		if c.authFailures.check(preauth, now) != nil {
			return false, ""
		}
		verifyCtx, cancel := context.WithTimeout(context.Background(), c.cfg.OIDC.FetchTimeout)
		defer cancel()
		id, err := c.identities.Verify(verifyCtx, string(token), now)
		if err != nil {
			c.authFailures.failed(preauth, now, err)
			return false, ""
		}
		return true, tenantHolder(id.ID) // its members' too (bodyHolder)
	}
	for _, kind := range [...]ocap.Kind{ocap.KindCapability, ocap.KindMember, ocap.KindClient} {
		if claims, err := c.signatureFor(preauth, token, kind); err == nil {
			return true, c.bodyHolder(claims)
		}
	}
	return false, ""
}

// bodyHolder is whom a capgate token's request bodies count for: its
// tenant — a client credential's (tenant: its jti, an OAuth client's
// every token its sub), a capability's tnt, a member token's member's
// (group.MemberTenants; a member no longer live: unknownTenant, one for
// them all) — else its sub (an admin grant's holder). A member token
// counted for its member before, so a tenant's many members were as
// many holders of max_body_bytes_held_per_holder (redteam13 #2).
func (c *Coordinator) bodyHolder(claims *ocap.Claims) string {
	switch {
	case claims.Kind() == ocap.KindClient:
		return tenantHolder(tenant(claims))
	case claims.Kind() == ocap.KindMember:
		return tenantHolder(c.share.memberTenant(claims.Group, claims.Subject))
	case claims.Tenant != "":
		return tenantHolder(claims.Tenant)
	}
	return "sub\x00" + claims.Subject
}

// tenantHolder is the holder key of tenant (join.go tenant; an IdP
// identity's id), one for its bodies and answers whichever of its tokens
// — credential, IdP token, member token, capability — carried them.
func tenantHolder(tenant string) string { return "tnt\x00" + tenant }

// bearerOf is the token of an "Authorization: Bearer" header, or nil.
func bearerOf(h *fasthttp.RequestHeader) []byte {
	v := h.Peek(fasthttp.HeaderAuthorization)
	const scheme = "bearer "
	if len(v) <= len(scheme) || !bytes.EqualFold(v[:len(scheme)], []byte(scheme)) {
		return nil
	}
	return bytes.TrimSpace(v[len(scheme):])
}

// fasthttpLogger routes fasthttp's own messages to zap at debug level;
// SecureErrorLogMessage keeps request contents out of them.
type fasthttpLogger struct{ log *zap.Logger }

func (l fasthttpLogger) Printf(format string, args ...any) {
	l.log.Debug("fasthttp", zap.String("message", fmt.Sprintf(format, args...)))
}

// serve routes one request and counts it by route and status.
func (c *Coordinator) serve(ctx *fasthttp.RequestCtx) {
	c.bodies.Handling(&ctx.Request.Header) // its body, if counted, is released at the end
	defer c.bodies.Release(&ctx.Request.Header)
	var name string
	if api.FoldedHeaders(ctx.Request.Header.RawHeaders()) {
		ctx.SetConnectionClose()
		writeError(ctx, api.CodeBadRequest, "folded header lines (obs-fold) are refused")
		name = "bad_request"
	} else if problem := api.CountFramingHeaders(ctx.Request.Header.RawHeaders()).Problem(); problem != "" {
		ctx.SetConnectionClose()
		writeError(ctx, api.CodeBadRequest, problem)
		name = "bad_request"
	} else if console.Owns(ctx.Path()) {
		name = c.console.Serve(ctx)
	} else if !c.acceptable(ctx) {
		name = "not_acceptable"
		noStore(ctx)
	} else {
		name = c.routes.dispatch(ctx)
		noStore(ctx)
	}
	c.metrics.observe(name, ctx)
}

// noStore marks the answers of the API routes (/v1/…) Cache-Control:
// no-store, as RFC 6749 asks of the token endpoint's: joins, grants,
// leases, attenuations, client credentials and OAuth client secrets are
// bearer tokens, which no shared or browser cache may keep.
func noStore(ctx *fasthttp.RequestCtx) {
	if bytes.HasPrefix(ctx.Path(), []byte("/v1/")) {
		ctx.Response.Header.Set("Cache-Control", "no-store")
	}
}

func (c *Coordinator) serveError(ctx *fasthttp.RequestCtx, err error) {
	if c.bodyRefused(ctx, err) {
		c.metrics.observe("error", ctx)
		return
	}
	if errors.Is(err, fasthttp.ErrBodyTooLarge) && c.checkedTooLate(ctx) {
		c.metrics.observe("error", ctx)
		return
	}
	if writeHTTPError(ctx, err, c.cfg) {
		c.metrics.observe("error", ctx)
	}
}

// checkedTooLate answers a body refused at the small cap whose bearer,
// a capgate token, the header check did not verify but which verifies
// now: 429 rate_limited with Retry-After, the token now in the
// verified-token cache, so that the same request sent again gets
// max_body_bytes. It reports whether it answered.
//
// The header check has no client address (fasthttp's HeaderReceived gets
// the headers alone), so its failed verifications share one budget
// (knownBearer): a stranger's forged tokens on large bodies spend it, and
// a large request with a token not verified before — a join naming many
// topics with a new credential, a commit of many partitions after a
// restart or takeover emptied the cache — was 413, which clients take as
// final, for as long as the flood went on (redteam20 #1). Here the token
// is verified on its own client's budget, as on every route. An IdP
// token is not: nothing keeps its verification, so the request sent
// again would be checked from its headers once more.
func (c *Coordinator) checkedTooLate(ctx *fasthttp.RequestCtx) bool {
	h := &ctx.Request.Header
	if !(h.IsPost() || h.IsPut() || h.IsPatch()) || h.ContentLength() > c.cfg.MaxBodyBytes || console.Owns(ctx.Path()) {
		return false
	}
	token := bearerOf(h)
	kind := ocap.ClaimedKind(token)
	if kind == "" || len(token) > ocap.MaxTokenBytes {
		return false
	}
	if _, cached := c.tokens.Get(token, c.now()); cached {
		return false // verified from its headers: the cap it got was its own
	}
	if _, err := c.signatureFor(budgetOf(ctx), token, kind); err != nil {
		return false
	}
	linger.OnClose(ctx) // the body may still be coming
	writeError(ctx, api.CodeRateLimited, "the coordinator could not check this token before the body came (its checks of new tokens are being refused: many failed ones); "+
		"it has checked it now: send the same request again")
	return true
}

// writeHTTPError answers a request fasthttp could not read; false when it
// closed the connection instead.
func writeHTTPError(ctx *fasthttp.RequestCtx, err error, cfg Config) bool {
	var small *fasthttp.ErrSmallBuffer
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		// No whole request within read_timeout (an idle pre-dialed
		// connection, or slow headers): close without an answer, which a
		// client would take for the response to a request it never sent.
		ctx.Conn().Close()
		return false
	}
	linger.OnClose(ctx) // the rest of the request is still coming (internal/linger)
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		// The request is already reset here: which cap applied is not
		// known, so name both (requestConfig).
		writeErrorDetails(ctx, api.CodeBodyTooLarge, fmt.Sprintf("request body too large: a request whose bearer is a valid token may send max_body_bytes (%d bytes), one without %d bytes (console %d)",
			cfg.MaxBodyBytes, preauthBodyBytes, consoleBodyBytes), map[string]any{"max_body_bytes": cfg.MaxBodyBytes, "preauth_body_bytes": preauthBodyBytes})
	case errors.As(err, &small):
		writeError(ctx, api.CodeHeadersTooLarge, fmt.Sprintf("request headers larger than %d bytes (coordinator.max_header_bytes; a bearer token counts against it)", cfg.MaxHeaderBytes))
	case crlf.Refusal(err) != nil:
		writeError(ctx, api.CodeBadRequest, crlf.Refusal(err).Error())
	default:
		writeError(ctx, api.CodeBadRequest, "malformed HTTP request")
	}
	return true
}

// writeError writes the JSON error body of code with its table status;
// 401 carries WWW-Authenticate, retriable 503s and 429s Retry-After.
func writeError(ctx *fasthttp.RequestCtx, code api.Code, message string) {
	writeErrorDetails(ctx, code, message, nil)
}

func writeErrorDetails(ctx *fasthttp.RequestCtx, code api.Code, message string, details map[string]any) {
	status := code.Status()
	switch status {
	case fasthttp.StatusUnauthorized:
		ctx.Response.Header.Set("WWW-Authenticate", `Bearer realm="capgate"`)
	case fasthttp.StatusServiceUnavailable, fasthttp.StatusTooManyRequests:
		ctx.Response.Header.Set("Retry-After", "1")
	}
	ctx.SetStatusCode(status)
	ctx.SetContentType(api.MediaJSON)
	ctx.SetBody(api.EncodeError(code, message, details))
}

// writeJSON writes v as the JSON body with status.
func writeJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(ctx, api.CodeInternal, "encode response")
		return
	}
	ctx.SetStatusCode(status)
	ctx.SetContentType(api.MediaJSON)
	ctx.SetBody(b)
}

// writeMachineError answers a request the machine rejected, or that the
// loop could not take.
func writeMachineError(ctx *fasthttp.RequestCtx, msg group.Message, err error) {
	switch {
	case errors.Is(err, errTaken):
		writeErrorDetails(ctx, api.CodeUnavailable, "the coordinator failed closed or is shutting down, after it took this request: "+
			"it may have been applied and persisted (check before repeating what is not safe to repeat; a join with its Idempotency-Key, "+
			"a commit, a release or a deny repeat safely)", map[string]any{"applied": "unknown"})
		return
	case err != nil:
		writeErrorDetails(ctx, api.CodeUnavailable, "the coordinator is shutting down or failed closed, before it took this request: nothing of it was applied; retry",
			map[string]any{"applied": "no"})
		return
	}
	if r, ok := msg.(group.Rejected); ok {
		writeErrorDetails(ctx, r.Code, r.Message, r.Details)
		if ms, ok := r.Details["retry_after_ms"].(int64); ok { // a heartbeat past held_heartbeats_per_tenant
			setRetryAfter(ctx, time.Duration(ms)*time.Millisecond)
		}
		return
	}
	writeError(ctx, api.CodeInternal, fmt.Sprintf("unexpected answer %T", msg))
}

// decodeBody decodes the JSON body into dst strictly (api.StrictJSON:
// exact json names, no key twice at any depth, no unknown field, nothing
// after the value; 400 naming the key and where it is). An empty body
// decodes as {} when empty is allowed. A body must come as Content-Type:
// application/json (415 otherwise: no text/plain or form body is read as
// JSON). On failure it writes the answer and returns false.
func decodeBody(ctx *fasthttp.RequestCtx, dst any, empty bool) bool {
	if problem := api.ContentCodingProblem(ctx.Request.Header.PeekAll(fasthttp.HeaderContentEncoding)); problem != "" {
		// A gzip body read as plain JSON, or a plain body a proxy in
		// front read as gzip: refused as the gateway's produce refuses it.
		ctx.Response.Header.Set(fasthttp.HeaderAcceptEncoding, "identity")
		writeError(ctx, api.CodeUnsupportedMediaType, problem)
		return false
	}
	body := ctx.PostBody()
	if len(bytes.TrimSpace(body)) == 0 {
		if empty {
			return true
		}
		writeError(ctx, api.CodeBadRequest, "request body required")
		return false
	}
	if !api.IsJSON(ctx.Request.Header.ContentType()) {
		writeError(ctx, api.CodeUnsupportedMediaType, api.NotJSONProblem(ctx.Request.Header.ContentType()))
		return false
	}
	if err := api.StrictJSON(body, dst); err != nil {
		writeError(ctx, api.CodeBadRequest, "invalid JSON body: "+err.Error())
		return false
	}
	return true
}
