package console

import (
	"crypto/subtle"
	"encoding/json"
	"time"

	"github.com/valyala/fasthttp"
	"go.uber.org/zap"
)

// The security model, in one place:
//   - Login takes the admin token in a POST body (never a URL), checks it
//     against the coordinator's hashes, and starts a server-side session.
//     The browser gets only an opaque 256-bit session id in an HttpOnly,
//     SameSite=Strict cookie scoped to /console (Secure on TLS); the token
//     itself is never stored, by the browser or the console.
//   - Every route but the login page and the static files needs a live
//     session (sessions expire after session_ttl; the table is bounded).
//   - Every state-changing request (POST/PUT) also needs an Origin (or,
//     failing that, Referer) of this very host, and the session's
//     synchronizer token in X-CSRF-Token or the csrf form field, compared
//     in constant time. Login, which has no session yet, checks a
//     one-time login token from a cookie against the form instead.
//   - Every answer carries a strict Content-Security-Policy (no inline
//     script or style, nothing from elsewhere, no framing), nosniff and
//     no-store.

const (
	sessionCookie = "capgate_console"
	loginCookie   = "capgate_console_login"
	csrfHeader    = "X-CSRF-Token"
	csrfField     = "csrf"
)

const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"

func securityHeaders(ctx *fasthttp.RequestCtx) {
	h := &ctx.Response.Header
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

// guard checks a non-public route's demands; on refusal it has answered.
func (c *Console) guard(ctx *fasthttp.RequestCtx, rt route) (*session, bool) {
	sess := c.sessions.get(string(ctx.Request.Header.Cookie(sessionCookie)))
	if sess == nil {
		if rt.access == page {
			seeOther(ctx, Prefix+"/login")
			return nil, false
		}
		writeProblem(ctx, fasthttp.StatusUnauthorized, "unauthorized", "log in to the console first")
		return nil, false
	}
	if rt.access != change {
		return sess, true
	}
	if !sameOrigin(ctx) {
		writeProblem(ctx, fasthttp.StatusForbidden, "forbidden", "cross-origin request refused")
		return nil, false
	}
	token := ctx.Request.Header.Peek(csrfHeader)
	if len(token) == 0 {
		token = ctx.PostArgs().Peek(csrfField)
	}
	if !equalToken(token, sess.csrf) {
		writeProblem(ctx, fasthttp.StatusForbidden, "forbidden", "missing or wrong CSRF token")
		return nil, false
	}
	return sess, true
}

// sameOrigin: the Origin header, or the Referer's origin when a browser
// sent no Origin, must be this host under this scheme. A request with
// neither is refused.
func sameOrigin(ctx *fasthttp.RequestCtx) bool {
	want := "http://" + string(ctx.Host())
	if ctx.IsTLS() {
		want = "https://" + string(ctx.Host())
	}
	if origin := ctx.Request.Header.Peek("Origin"); len(origin) > 0 {
		return string(origin) == want
	}
	ref := string(ctx.Request.Header.Referer())
	return len(ref) > len(want) && ref[:len(want)] == want && ref[len(want)] == '/'
}

// seeOther answers 303 to path (one of this console's, a constant) sent
// as it is: a relative Location. fasthttp's ctx.Redirect makes it absolute from the
// request's Host header, which is the client's to choose (a proxy or cache
// in front would keep, and hand others, a redirect to any host it names).
// A browser resolves a path against the URL it asked for.
func seeOther(ctx *fasthttp.RequestCtx, path string) {
	ctx.Response.Header.Set(fasthttp.HeaderLocation, path)
	ctx.SetStatusCode(fasthttp.StatusSeeOther)
}

func equalToken(got []byte, want string) bool {
	return len(got) > 0 && subtle.ConstantTimeCompare(got, []byte(want)) == 1
}

// setCookie sets an HttpOnly, SameSite=Strict cookie under /console,
// Secure when the connection is TLS; maxAge 0 deletes it.
func setCookie(ctx *fasthttp.RequestCtx, name, value string, maxAge time.Duration) {
	var ck fasthttp.Cookie
	ck.SetKey(name)
	ck.SetValue(value)
	ck.SetPath(Prefix)
	ck.SetHTTPOnly(true)
	ck.SetSameSite(fasthttp.CookieSameSiteStrictMode)
	ck.SetSecure(ctx.IsTLS())
	if maxAge > 0 {
		ck.SetMaxAge(int(maxAge / time.Second))
	} else {
		ck.SetExpire(fasthttp.CookieExpireDelete)
	}
	ctx.Response.Header.SetCookie(&ck)
}

// writeProblem answers with the coordinator's JSON error shape.
func writeProblem(ctx *fasthttp.RequestCtx, status int, code, message string) {
	writeProblemDetails(ctx, status, code, message, nil)
}

// writeProblemDetails is writeProblem with details beside code and
// message.
func writeProblemDetails(ctx *fasthttp.RequestCtx, status int, code, message string, details map[string]any) {
	e := map[string]any{"code": code, "message": message}
	for k, v := range details {
		e[k] = v
	}
	body, _ := json.Marshal(map[string]any{"error": e})
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(body)
}

// refused counts a refused login and logs it at most once a second,
// without the token.
func (c *Console) refused(ctx *fasthttp.RequestCtx, why string) {
	c.refusals.WithLabelValues(why).Inc()
	now := c.now().UnixMilli()
	last := c.loggedAt.Load()
	if now-last < 1000 || !c.loggedAt.CompareAndSwap(last, now) {
		return
	}
	c.log.Warn("console login refused", zap.String("why", why), zap.String("remote", c.backend.ClientAddr(ctx).String()))
}
