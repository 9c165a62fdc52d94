package gateway

// Behavior: how much of a request's body the gateway reads is decided
// from its headers, before the body is read (fasthttp.Server's
// HeaderReceived): a POST bearing a capability that verifies and holds
// the produce op, or a client credential that verifies and may produce
// to some topic (ocap.Claims.ProducesAnywhere; the route decides the
// topic), may send max_body_bytes; every other request — no token, a
// token that does not verify, a capability or credential without
// produce, a route that takes no body (GET, HEAD) — preauthBodyBytes. fasthttp
// reads a body whole, and allocates a Content-Length body at its
// announced size, before any handler runs, so without this cap an
// unauthenticated client could make the gateway hold max_body_bytes per
// connection (4 MiB × max_connections 20,000: 80 GiB).
//
// Before the first sync no capability verifies: a body over the small
// cap is then answered 503 not_ready (Retry-After), as a small one is.
// Otherwise a body over its cap is answered 413 body_too_large naming both caps
// (the error handler cannot tell which one applied), unless its bearer,
// unchecked from the headers, now verifies as a producer's
// (checkedTooLate: 429 rate_limited, send it again), and the connection lingers
// (internal/linger) so the client reads the answer rather than a reset.
// 413 rather than 401: the body is refused before any route ran, and a
// GET carrying a body would otherwise be told its valid capability is
// wrong. A small body without a token still gets the route's 401.

import (
	"cmp"
	"errors"
	"time"

	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/internal/bodyheld"
	"github.com/capgate/capgate/internal/crlf"
	"github.com/capgate/capgate/internal/linger"
	"github.com/capgate/capgate/ocap"
)

// preauthBodyBytes is the body a request may send unless it bears a
// capability with the produce op (and the most any GET or HEAD may send).
const preauthBodyBytes = 4 << 10

// answerUnreadable is the server's ErrorHandler: a head internal/crlf
// refused (a line ending in a bare LF, or not HTTP at all) is 400
// bad_request saying why; anything else as handleServerError answers it.
func (g *Gateway) answerUnreadable(ctx *fasthttp.RequestCtx, err error) {
	if why := g.bodies.Release(&ctx.Request.Header); why != bodyheld.None && errors.Is(err, fasthttp.ErrBodyTooLarge) {
		// Refused from its headers for the bodies held (bodyheld.go),
		// not for its size.
		linger.OnClose(ctx)
		g.answerBodyRefused(ctx, why)
		return
	}
	refusal := crlf.Refusal(err)
	if refusal == nil {
		g.handleServerError(ctx, err)
		return
	}
	linger.OnClose(ctx) // the rest of the request may still be coming
	if refusal == crlf.ErrKafkaRequest {
		g.warnKafkaAtHTTP(ctx)
	}
	writeError(ctx, api.CodeBadRequest, refusal.Error(), nil)
	g.metrics.rejected(api.CodeBadRequest)
}

// warnKafkaAtHTTP logs a Kafka client at the HTTP port, with where it
// belongs: the client reads the 400 as a Kafka answer and says only
// "Invalid response size 1213486160" (the bytes "HTTP"), and the gateway
// said nothing (newuser9: kcat -b 127.0.0.1:8080, the gateway's address
// in capgate dev's banner, for its Kafka listener's 9093).
func (g *Gateway) warnKafkaAtHTTP(ctx *fasthttp.RequestCtx) {
	where := "set gateway.kafka_listen to serve Kafka clients"
	if g.cfg.KafkaListen != "" {
		where = "point its bootstrap servers at the Kafka listener, " + cmp.Or(g.cfg.KafkaAdvertised, g.cfg.KafkaListen) + " (gateway.kafka_listen)"
	}
	g.kafkaAtHTTP.LineAt(time.Now(), "a Kafka client connected to the gateway's HTTP address: "+where,
		zap.String("remote", ctx.RemoteAddr().String()), zap.String("listen", g.cfg.Listen))
}

// requestConfig is the server's HeaderReceived: the body cap of a
// request, and a body over preauthBodyBytes counted among the bodies
// held (bodyheld.go) — over their caps it gets the small cap, and the
// ErrorHandler the refusal recorded for it.
func (g *Gateway) requestConfig(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	limit, bearer := g.bodyGrant(h)
	if bearer != nil {
		limit = g.bodies.Cap(h, holderOf(bearer), limit, preauthBodyBytes, time.Now())
	}
	return fasthttp.RequestConfig{MaxRequestBodySize: limit}
}

// bodyLimit is max_body_bytes for a POST whose bearer verifies as a
// capability with the produce op, preauthBodyBytes otherwise.
func (g *Gateway) bodyLimit(h *fasthttp.RequestHeader) int {
	limit, _ := g.bodyGrant(h)
	return limit
}

// bodyGrant is bodyLimit and, when it is more than preauthBodyBytes, the
// bearer's claims. The verification goes through the verified-token
// cache, so the handler's own check of the same token is a cache hit. It
// runs for every request, so a fetch (GET) returns before reading the
// clock.
func (g *Gateway) bodyGrant(h *fasthttp.RequestHeader) (int, *ocap.Claims) {
	if !h.IsPost() || h.ContentLength() == 0 {
		return preauthBodyBytes, nil
	}
	if n := h.ContentLength(); n > 0 && n <= preauthBodyBytes {
		return preauthBodyBytes, nil // fits the small cap: the handler checks the token, within its client's budget
	}
	token, _ := bearerToken(h)
	if len(token) == 0 || len(token) > ocap.MaxTokenBytes {
		return preauthBodyBytes, nil
	}
	now := time.Now()
	if kind, _ := tokenKind(token); kind == ocap.KindClient {
		return g.credentialBodyLimit(token, now)
	}
	c, ok := g.cache.Get(token, now)
	if !ok {
		var err error
		// The client's address is not known here (fasthttp hands
		// HeaderReceived the headers alone): failures are budgeted
		// under the zero address, one budget for every pre-auth check.
		// Under a flood of forged tokens on large POSTs, a large produce
		// whose capability was never verified before gets the small cap,
		// and its refusal checks it on its client's own budget (429, send
		// it again: checkedTooLate); cached capabilities never do.
		if c, err = g.verifyCapability(token, caller{}, now); err != nil {
			return preauthBodyBytes, nil
		}
	}
	if !c.Ops.Has(ocap.OpProduce) {
		return preauthBodyBytes, nil
	}
	return max(g.cfg.MaxBodyBytes, preauthBodyBytes), c
}

// checkedTooLate answers a body refused at preauthBodyBytes whose bearer
// the header check did not verify but which verifies now as a producer
// whose body may be max_body_bytes: 429 rate_limited with Retry-After,
// the token now in its verified-token cache, so that the same request
// sent again gets max_body_bytes. It reports whether it answered.
//
// The header check has no client address (fasthttp's HeaderReceived gets
// the headers alone), so its failed verifications share one budget: a
// stranger's forged tokens on large POSTs spend it, and every producer's
// first large produce with a token the gateway had not verified yet — a
// producer starting, a new grant, every producer after a restart — was
// 413, which producers take as final, for as long as the flood went on
// (redteam20 #1). Here the token is verified on its own client's budget
// (an address, as every other check: a forger's tokens spend only its
// own). A token verified before, or cached by the header check (it
// verified: what it got was its cap), is not checked again.
func (g *Gateway) checkedTooLate(ctx *fasthttp.RequestCtx) bool {
	h := &ctx.Request.Header
	if !h.IsPost() || h.ContentLength() > g.cfg.MaxBodyBytes {
		return false
	}
	token, _ := bearerToken(h)
	if len(token) == 0 || len(token) > ocap.MaxTokenBytes {
		return false
	}
	now := time.Now()
	who := caller{ctx: ctx}
	producer := false
	if kind, _ := tokenKind(token); kind == ocap.KindClient {
		if _, cached := g.credentials.Get(token, now); cached {
			return false
		}
		// Verified and cached as VerifyClient does; its deny-list and
		// expiry are the handler's to answer, on the request sent again.
		v := g.verifier.Load()
		if v == nil {
			return false
		}
		c, err := g.verifyWithin(v, string(token), ocap.KindClient, g.callerAddr(who), now)
		if producer = err == nil && c.ProducesAnywhere(); producer {
			g.credentials.Put(string(token), c)
		}
	} else {
		if _, cached := g.cache.Get(token, now); cached {
			return false
		}
		c, err := g.verifyCapability(token, who, now)
		producer = err == nil && c.Ops.Has(ocap.OpProduce)
	}
	if !producer {
		return false
	}
	setRetryAfter(ctx, time.Second)
	writeError(ctx, api.CodeRateLimited, "the gateway could not check this token before the body came (its checks of new tokens are being refused: many failed ones); "+
		"it has checked it now: send the same request again", nil)
	g.metrics.rejected(api.CodeRateLimited)
	return true
}
