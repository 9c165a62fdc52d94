package console

// Behavior: login and logout.
//   GET  /console/login  → the login form, with a one-time login token in
//     a short-lived cookie and in the form (login CSRF: a page on another
//     site can neither read the cookie nor make the browser send it).
//   POST /console/login  (form: token, csrf) → 303 to /console/groups with
//     a new session cookie when the Origin is this host, the login token
//     matches the cookie and token is an admin token, or a JWT of an OIDC
//     issuer whose claims match its console_admins (the session then ends
//     no later than the token, and as soon as its identity is denied), ending the session the browser came
//     with, if any; else 403 (origin or login token) or 401
//     (wrong token), with the form again.
//   POST /console/logout (csrf) → ends the session, 303 to the login page.

import (
	"time"

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

func (c *Console) serveLogin(ctx *fasthttp.RequestCtx, _ *session, _ []string) {
	if !sameOrigin(ctx) {
		c.refused(ctx, "cross-origin")
		c.loginForm(ctx, fasthttp.StatusForbidden, "Cross-origin login refused.")
		return
	}
	if !equalToken(ctx.PostArgs().Peek(csrfField), string(ctx.Request.Header.Cookie(loginCookie))) {
		c.refused(ctx, "login token")
		c.loginForm(ctx, fasthttp.StatusForbidden, "The login form expired; try again.")
		return
	}
	token := ctx.PostArgs().Peek("token")
	who, until, ok := "", time.Time{}, false
	var denied func() bool
	if len(token) > 0 && len(token) <= maxTokenBytes {
		if ok = c.backend.IsAdminToken(token); ok {
			who = "admin"
		} else {
			who, until, denied, ok = c.backend.IdentityAdmin(token)
		}
	}
	if !ok {
		c.refused(ctx, "wrong token")
		c.loginForm(ctx, fasthttp.StatusUnauthorized, "That is not an admin token, nor an operator's token of a trusted identity provider.")
		return
	}
	c.sessions.end(string(ctx.Request.Header.Cookie(sessionCookie))) // a session the browser came with ends: one browser, one session
	id, _ := c.sessions.create(who, until, denied)
	setCookie(ctx, sessionCookie, id, c.cfg.SessionTTL)
	setCookie(ctx, loginCookie, "", 0)
	ctx.Redirect(Prefix+"/groups", fasthttp.StatusSeeOther)
}

func (c *Console) serveLogout(ctx *fasthttp.RequestCtx, _ *session, _ []string) {
	c.sessions.end(string(ctx.Request.Header.Cookie(sessionCookie)))
	setCookie(ctx, sessionCookie, "", 0)
	ctx.Redirect(Prefix+"/login", fasthttp.StatusSeeOther)
}

func (c *Console) serveRoot(ctx *fasthttp.RequestCtx, _ *session, _ []string) {
	ctx.Redirect(Prefix+"/groups", fasthttp.StatusSeeOther)
}
