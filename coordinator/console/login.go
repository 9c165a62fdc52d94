package console

// Behavior: login and logout.
//   GET  /console/login  → the login form, with a one-time login token in
//     a short-lived cookie and in the form (login CSRF: a page on another
//     site can neither read the cookie nor make the browser send it).
//   POST /console/login  (form: token, csrf) → 303 to /console/groups (every
//     console redirect's Location is that path alone, never built from Host) with
//     a new session cookie when the Origin is this host, the login token
//     matches the cookie and token is an admin token, or a JWT of an OIDC
//     issuer whose claims match its console_admins (the session then ends
//     no later than the token, and as soon as its identity is denied), ending the session the browser came
//     with, if any; else 403 (origin or login token) or 401
//     (wrong token), with the form again — saying, for a token of a
//     configured issuer, why it was refused (loginProblem). Past console.login_max_failures
//     failed logins from the client's address within
//     console.login_failure_window (or while the limiter's table of
//     addresses is full of failing ones), 429 with Retry-After before the
//     token is looked at: the form saying when to try again to a browser
//     (Accept: text/html), else the JSON error body (code rate_limited,
//     retry_after_ms). Each refusal counts in
//     capgate_coordinator_console_login_refusals_total{reason}.
//   POST /console/logout (csrf) → ends the session, 303 to the login page.

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/valyala/fasthttp"
)

const (
	loginTokenTTL = 10 * time.Minute
	maxTokenBytes = 16 << 10 // an admin token is a 256-bit secret, an IdP JWT a few KiB; tokens are checked after this cap
)

type loginView struct {
	CSRF  string
	Error string
}

func (c *Console) serveLoginPage(ctx *fasthttp.RequestCtx, _ *session, _ []string) {
	c.loginForm(ctx, fasthttp.StatusOK, "")
}

func (c *Console) loginForm(ctx *fasthttp.RequestCtx, status int, problem string) {
	nonce := randomToken()
	setCookie(ctx, loginCookie, nonce, loginTokenTTL)
	c.render(ctx, status, "login", pageData{Title: "Log in", Body: loginView{CSRF: nonce, Error: problem}})
}

// Why a login was refused: the reason label of the refusals metric.
const (
	refusedCrossOrigin = "cross_origin"
	refusedLoginToken  = "login_token"
	refusedWrongToken  = "wrong_token"
	refusedRateLimited = "rate_limited"
)

var loginRefusals = []string{refusedCrossOrigin, refusedLoginToken, refusedWrongToken, refusedRateLimited}

func (c *Console) serveLogin(ctx *fasthttp.RequestCtx, _ *session, _ []string) {
	if !sameOrigin(ctx) {
		c.refused(ctx, refusedCrossOrigin)
		c.loginForm(ctx, fasthttp.StatusForbidden, "Cross-origin login refused.")
		return
	}
	if !equalToken(ctx.PostArgs().Peek(csrfField), string(ctx.Request.Header.Cookie(loginCookie))) {
		c.refused(ctx, refusedLoginToken)
		c.loginForm(ctx, fasthttp.StatusForbidden, "The login form expired; try again.")
		return
	}
	attempt, addr, wait := c.logins.begin(c.backend.ClientAddr(ctx), c.now())
	if wait > 0 {
		c.rateLimited(ctx, addr, wait)
		return
	}
	who, until, denied, err := c.checkToken(ctx.PostArgs().Peek("token"))
	attempt.end(err != nil, c.now())
	if err != nil {
		c.refused(ctx, refusedWrongToken)
		c.loginForm(ctx, fasthttp.StatusUnauthorized, loginProblem(err))
		return
	}
	c.sessions.end(string(ctx.Request.Header.Cookie(sessionCookie))) // a session the browser came with ends: one browser, one session
	id, _ := c.sessions.create(who, until, denied)
	setCookie(ctx, sessionCookie, id, c.cfg.SessionTTL)
	setCookie(ctx, loginCookie, "", 0)
	seeOther(ctx, Prefix+"/groups")
}

// ErrNotIdentityToken: a login token that is neither an admin token nor
// a JWT naming a configured OIDC issuer.
var ErrNotIdentityToken = errors.New("console: not an admin token, nor a token of a configured OIDC issuer")

// checkToken says who token logs in as: the admin token, or an IdP token
// of an operator (with when it expires and whether it is denied since).
func (c *Console) checkToken(token []byte) (who string, until time.Time, denied func() bool, err error) {
	if len(token) == 0 || len(token) > maxTokenBytes {
		return "", time.Time{}, nil, ErrNotIdentityToken
	}
	if c.backend.IsAdminToken(token) {
		return "admin", time.Time{}, nil, nil
	}
	return c.backend.IdentityAdmin(token)
}

// loginProblem is what the login form says of a refused token. A token
// of a configured issuer is told why (expired, another audience, none of
// console_admins, denied: before, every refusal read as the first line
// alone, and the coordinator logged nothing, so an operator whose IdP
// token did not log in could not tell which of these to fix).
func loginProblem(err error) string {
	const wrong = "That is not an admin token, nor an operator's token of a trusted identity provider."
	if errors.Is(err, ErrNotIdentityToken) {
		return wrong
	}
	return wrong + " Your identity provider's token was refused: " + err.Error()
}

// rateLimited answers a login from an address out of failures: 429 with
// Retry-After, and the login form saying when to try again to a browser,
// else the JSON error body. It logs a warning (the address, never the
// token) at most once a second.
func (c *Console) rateLimited(ctx *fasthttp.RequestCtx, addr string, wait time.Duration) {
	c.refusals.WithLabelValues(refusedRateLimited).Inc()
	seconds := int64((wait + time.Second - 1) / time.Second)
	if now, last := c.now().UnixMilli(), c.limitedAt.Load(); now-last >= 1000 && c.limitedAt.CompareAndSwap(last, now) {
		c.log.Warn("console login rate limited: too many failed logins from this address",
			zap.String("address", addr), zap.Int64("retry_after_s", seconds), zap.Int("max_failures", c.cfg.LoginMaxFailures),
			zap.Duration("window", c.cfg.LoginFailureWindow))
	}
	ctx.Response.Header.Set("Retry-After", strconv.FormatInt(seconds, 10))
	if bytes.Contains(ctx.Request.Header.Peek("Accept"), []byte("text/html")) {
		c.loginForm(ctx, fasthttp.StatusTooManyRequests, fmt.Sprintf("Too many failed logins from your address. Try again in %d seconds.", seconds))
		return
	}
	writeProblemDetails(ctx, fasthttp.StatusTooManyRequests, refusedRateLimited,
		fmt.Sprintf("too many failed console logins from this address; retry in %d s", seconds),
		map[string]any{"retry_after_ms": wait.Milliseconds()})
}

func (c *Console) serveLogout(ctx *fasthttp.RequestCtx, _ *session, _ []string) {
	c.sessions.end(string(ctx.Request.Header.Cookie(sessionCookie)))
	setCookie(ctx, sessionCookie, "", 0)
	seeOther(ctx, Prefix+"/login")
}

func (c *Console) serveRoot(ctx *fasthttp.RequestCtx, _ *session, _ []string) {
	seeOther(ctx, Prefix+"/groups")
}
