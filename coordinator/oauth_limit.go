package coordinator

import (
	"strconv"
	"time"

	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/capgate/capgate/internal/failguard"
)

// The token endpoint's failure budget. Only failed client
// authentications ever reach it: the handler checks the secret first,
// and the right secret of a live client gets its token whatever the
// budget holds. Client ids are not secret — each is the sub of every
// credential its client holds — so a budget that refused before the
// secret, per client id, let anyone who saw one credential lock its
// client out of /oauth/token for as long as they kept guessing; per
// address it would let a neighbour behind the same NAT, or anyone at all
// behind an ingress proxy that every client comes through, do the same.
// What the budget bounds is how a guesser is answered and what it costs:
// oauth.max_failures failures per client address (IPv6: per /64; behind
// trusted_proxies, the client X-Forwarded-For names) within
// oauth.failure_window, refilled evenly, are answered 401; past them a
// wrong secret is 429 with Retry-After and counts nothing more. Each
// guess costs one SHA-256 of a body within preauthBodyBytes and a lookup
// — no store write, no mint. The secret itself is kept by its 256 random
// bits, not by the budget. The table is internal/failguard's: at most
// oauth.limiter_entries addresses, refilled ones dropped when full, then
// one bucket shared by every new address.
//
// Only the address is keyed, not (client id, address): with the secret
// checked first a budget decides only whether a failure is answered 401
// or 429, and a pair budget inside the address's changes nothing a
// guesser can gain.

// newOAuthFailureGuard is the failure budget of cfg.
func newOAuthFailureGuard(cfg OAuthConfig) *failguard.Guard {
	return failguard.New(float64(cfg.MaxFailures)/cfg.FailureWindow.Seconds(), cfg.MaxFailures, cfg.LimiterEntries)
}

// refuseOAuthClient answers a failed client authentication: 401 invalid_client, charged to the caller's address, or — its
// failures spent — 429 temporarily_unavailable with Retry-After, charged
// nothing (a throttled caller's wait never exceeds one failure's
// refill). Both are counted and logged (rate-limited), never the secret.
func (c *Coordinator) refuseOAuthClient(ctx *fasthttp.RequestCtx, req tokenRequest, now time.Time) {
	addr := c.clientAddr(ctx)
	if wait, blocked := c.oauth.failures.Blocked(addr, now); blocked {
		retry := max(1, (wait+time.Second-1)/time.Second)
		c.refusedOAuth(oauthRefusedThrottled, req.clientID, addr, zap.Duration("retry_after", retry*time.Second))
		ctx.Response.Header.Set("Retry-After", strconv.Itoa(int(retry)))
		writeOAuthError(ctx, oauthSlowDown, "too many failed client authentications from this address; retry later", false)
		return
	}
	c.oauth.failures.Failed(addr, now)
	c.refusedOAuth(oauthRefusedInvalid, req.clientID, addr)
	writeOAuthError(ctx, oauthInvalidClient, "client authentication failed", req.basic)
}
