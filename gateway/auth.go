package gateway

import (
	"bytes"
	"errors"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/gateway/authz"
	"github.com/capgate/capgate/gateway/kafkaproto"
	"github.com/capgate/capgate/internal/failguard"
	"github.com/capgate/capgate/ocap"
)

// bearerToken returns the token of "Authorization: Bearer <token>" (scheme
// case-insensitive); present reports whether any Authorization was sent.
func bearerToken(h *fasthttp.RequestHeader) (token []byte, present bool) {
	v := h.Peek(fasthttp.HeaderAuthorization)
	if len(v) == 0 {
		return nil, false
	}
	const scheme = "bearer "
	if len(v) <= len(scheme) || !bytes.EqualFold(v[:len(scheme)], []byte(scheme)) {
		return nil, true
	}
	return bytes.TrimSpace(v[len(scheme):]), true
}

// refuseNoBearer answers 401 to a request with no bearer token (none,
// or an Authorization of another scheme) and returns its code; "" when
// there is one. what names the token the route takes; missing, when not
// "", is the whole answer to a request with none. The records routes
// call it before they read their path, query or body: a stranger learns
// that the route authenticates, not how it parses (newuser14's walk: a
// fetch with no token and no offset was 400 "offset is required").
func refuseNoBearer(ctx *fasthttp.RequestCtx, what, missing string) api.Code {
	token, present := bearerToken(&ctx.Request.Header)
	if len(token) > 0 {
		return ""
	}
	message := missing
	if message == "" {
		message = "bearer " + what + " required"
	}
	if present {
		message = "Authorization must be: Bearer <" + what + ">"
	}
	writeError(ctx, api.CodeUnauthorized, message, nil)
	return api.CodeUnauthorized
}

// capability verifies the request's bearer capability (see
// verifyCapability). On failure it has answered 401 and returns the code.
func (g *Gateway) capability(ctx *fasthttp.RequestCtx, now time.Time) (*ocap.Claims, api.Code) {
	token, _ := bearerToken(&ctx.Request.Header)
	if code := refuseNoBearer(ctx, "capability", ""); code != "" {
		return nil, code
	}
	c, err := g.verifyCapability(token, caller{ctx: ctx}, now)
	if err != nil {
		var spent *failguard.Spent
		if errors.As(err, &spent) {
			setRetryAfter(ctx, spent.Wait)
			writeError(ctx, api.CodeRateLimited, err.Error()+" (gateway auth_failures_per_second)", nil)
			return nil, api.CodeRateLimited
		}
		code := api.CodeUnauthorized
		if errors.Is(err, ocap.ErrExpired) {
			code = api.CodeTokenExpired
		}
		writeError(ctx, code, refusalMessage(token, err), nil)
		return nil, code
	}
	return c, ""
}

// refusalMessage is the 401's message: the verifier's reason, or for
// another kind of capgate token what it is and where capabilities come
// from (the usual first mistake: CAPGATE_CREDENTIAL sent to a gateway).
func refusalMessage(token []byte, err error) string {
	if !errors.Is(err, ocap.ErrBadType) {
		return err.Error() + opaqueTokenHint(token, err)
	}
	switch ocap.ClaimedKind(token) {
	case ocap.KindClient:
		return "a client credential is not a capability: join a group with it at the coordinator (POST /v1/groups/{group}/join); each granted partition comes with its capability"
	case ocap.KindMember:
		return "a member token is not a capability: it is for the coordinator (heartbeat, commit, leave); fetch with the capability of each partition the join or heartbeat granted"
	}
	return err.Error()
}

// opaqueTokenHint is what a gateway takes instead of a token with no
// dot in it — capgate's admin and sync tokens are such: the admin token
// as the bearer of a fetch read "malformed token: 3 dot-separated
// segments … expected, got 1" and no more (newuser9) — "" for any other
// refusal.
func opaqueTokenHint(token []byte, err error) string {
	if !errors.Is(err, ocap.ErrMalformed) || bytes.Contains(token, []byte(".")) {
		return ""
	}
	return " (an opaque token, as capgate's admin and sync tokens are, is not for a gateway: fetch with a capability — a join's grants, capgate admin grant —, produce with one or with a client credential allowed to produce)"
}

// caller is whose failed verifications a token check is charged to: a
// connection's address (the Kafka listener; the zero address, the
// pre-auth check's one budget), or an HTTP request, whose client address
// (through trusted_proxies) is read only on a cache miss.
type caller struct {
	ctx  *fasthttp.RequestCtx
	addr netip.Addr
}

// callerAddr is who's address.
func (g *Gateway) callerAddr(who caller) netip.Addr {
	if who.ctx == nil {
		return who.addr
	}
	return g.proxies.Request(who.ctx)
}

// verifyCapability checks a capability token: the verified-token cache
// first, then — within who's budget of failed verifications (authBudget)
// — the verifier (cached only on success; a failure is charged to who).
// A capability verified for the first time whose epoch is above the
// view's fence raises the fence (the coordinator mints e+1 only after
// fencing e) and cancels in-flight fetches under older epochs. The HTTP
// and Kafka listeners share it.
func (g *Gateway) verifyCapability(token []byte, who caller, now time.Time) (*ocap.Claims, error) {
	if c, ok := g.cache.Get(token, now); ok {
		g.metrics.cacheHits.Inc()
		return c, nil
	}
	g.metrics.cacheMisses.Inc()
	s := string(token)
	c, err := g.verifyAndCache(s, g.callerAddr(who), now)
	if err != nil {
		return nil, err
	}
	if c.Epoch != 0 && g.view.Raise(c.Group, c.Topic, c.PartitionNumber(), c.Epoch) {
		n := g.inflight.cancelBelow(authz.FenceKey{Group: c.Group, Topic: c.Topic, Partition: c.PartitionNumber()}, c.Epoch, errFenced)
		g.log.Debug("fence raised by a newer capability", zap.String("group", c.Group), zap.String("topic", c.Topic),
			zap.Int32("partition", c.PartitionNumber()), zap.Uint64("epoch", c.Epoch), zap.String("jti", c.ID), zap.Int("cancelled", n))
	}
	return c, nil
}

// verifyAndCache verifies capability token with the verifier in use
// and caches it — unless the sync loop removed its key (or replaced the
// verifier: new settings) meanwhile. The sync loop sets the keys first
// and flushes the cache of the removed ones after (applySync, learn); a
// verification that checked the signature before the removal and Put
// after the flush left a token of a removed key cached until its exp,
// up to max_lease (redteam20). So after Put it looks again: a Put before
// the flush is flushed by it, one after it sees the removal here, takes
// the token out again and verifies once more with what is in use now
// (which refuses it: its key is gone).
func (g *Gateway) verifyAndCache(token string, from netip.Addr, now time.Time) (*ocap.Claims, error) {
	for try := 0; ; try++ {
		v := g.verifier.Load()
		if v == nil {
			return nil, errNotReady
		}
		c, err := g.verifyWithin(v, token, ocap.KindCapability, from, now)
		if err != nil {
			return nil, err
		}
		if g.afterVerify != nil {
			g.afterVerify()
		}
		g.cache.Put(token, c)
		if g.verifier.Load() == v && v.HasKey(c.KeyID()) {
			return c, nil
		}
		g.cache.FlushKeys(c.KeyID())
		if try > 0 {
			return nil, errKeysChanging
		}
	}
}

// errKeysChanging: the keys changed under two verifications of one
// token in a row; the client tries again.
var errKeysChanging = errors.New("gateway: the coordinator's keys changed while the token was verified: try again")

// verifyWithin verifies token as kind within from's budget of failed
// verifications (authBudget), charging a failure (authFailed) and
// remembering the holder of a success at from (failguard.Guard.Verified:
// once from's budget is spent, that holder's next tokens are still
// checked, on a budget of their own).
//
// A token of kind (its header's typ) whose claimed exp has passed (with
// the verifier's leeway) is refused first, ErrExpired, with no signature
// checked and nothing charged: whether genuine (a slow consumer's
// capability that expired on its way) or forged, it is refused, and it
// cost no signature — the budget bounds signature checks, and charging
// a genuine expired token as a forgery had its holder's address refused
// fresh tokens 429. A token of another kind goes on to the verifier,
// which names its kind (ErrBadType, uncharged too).
func (g *Gateway) verifyWithin(v *ocap.Verifier, token string, kind ocap.Kind, from netip.Addr, now time.Time) (*ocap.Claims, error) {
	if ocap.ClaimedKind([]byte(token)) == kind {
		if err := expiredClaim(token, v.Config().Leeway, now); err != nil {
			return nil, err
		}
	}
	pass, err := g.authBudget(from, token, now)
	if err != nil {
		return nil, err
	}
	c, err := v.Verify(token, kind, now)
	if err != nil {
		g.authFailed(pass, now, err)
		return nil, err
	}
	g.authFailures.Verified(from, failguard.HolderOf(c.Issuer, c.Subject, c.Tenant), now)
	return c, nil
}

var _ kafkaproto.FailureBudget = kafkaGate{}

// WithinBudget lends the Kafka listener's IdP tokens (kafkaproto's
// idpAuthenticator) the budget of failed verifications per client
// address that capgate's tokens have (verifyWithin): verify runs within
// from's budget (or its known holder's: the token's unverified iss and
// sub); a failure (verify's false) is charged, a success remembers the
// holder at from.
func (k kafkaGate) WithinBudget(token string, from netip.Addr, now time.Time, verify func() (bool, error)) error {
	g := k.g
	pass, err := g.authBudget(from, token, now)
	if err != nil {
		return err
	}
	good, err := verify()
	if !good {
		g.authFailed(pass, now, err)
	} else if h, ok := failguard.Claimed(token); ok {
		g.authFailures.Verified(from, h, now)
	}
	return err
}

// authFailureAddresses bounds the addresses whose failed verifications
// the gateway tracks (failguard: past it new addresses share one budget).
const authFailureAddresses = 1 << 16

// newAuthGuard is the budget of failed verifications per client address
// (auth_failures_per_second, auth_failure_burst) with its known-holder
// path (failguard.Holders): per (address, holder) a tenth of the
// address's budget (burst at least 1), 256 holders an address, 65,536 in
// all, each remembered a day after it last verified (a client credential
// may join once a day; a capability renews every few minutes).
func newAuthGuard(cfg Config) *failguard.Guard {
	perSecond, burst := cfg.AuthFailuresPerSecond, cfg.AuthFailureBurst
	return failguard.New(perSecond, burst, authFailureAddresses).Remember(failguard.Holders{
		PerSecond: perSecond / 10, Burst: max(burst/10, 1), PerAddress: 256, Max: 1 << 16, TTL: 24 * time.Hour})
}

// authHolderMetrics are the known-holder path's counts and size.
func authHolderMetrics(guard *failguard.Guard) []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "capgate_gateway_auth_known_holder_admitted_total",
			Help: "Tokens checked although their client address had spent its failed verifications, because their holder had verified from that address before."},
			func() float64 { return float64(guard.Stats().Admitted) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "capgate_gateway_auth_known_holder_throttled_total",
			Help: "Tokens of such a known holder refused unchecked (429, a refused SASL) because that holder's own budget of failures at the address was spent too."},
			func() float64 { return float64(guard.Stats().Refused) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "capgate_gateway_auth_known_holders",
			Help: "Holders remembered as verified from a client address (at most 65,536; 256 an address)."},
			func() float64 { return float64(guard.Stats().Holders) }),
	}
}

// authBudget is a pass while from may still have token verified: within
// from's budget, or past it for a holder verified from from before
// (counted: capgate_gateway_auth_known_holder_*).
func (g *Gateway) authBudget(from netip.Addr, token string, now time.Time) (failguard.Pass, error) {
	pass, err := g.authFailures.Admit(from, token, now)
	if err != nil {
		g.metrics.authThrottled.Inc()
	}
	return pass, err
}

// authFailed charges a failed verification to pass (its address, or the
// holder it was admitted for). A token of another kind (a client
// credential offered where a capability was tried first, as the Kafka
// listener's SASL does) fails on its header before any signature is
// checked, and is not charged.
func (g *Gateway) authFailed(pass failguard.Pass, now time.Time, err error) {
	if errors.Is(err, ocap.ErrBadType) {
		return
	}
	g.metrics.authFailures.Inc()
	g.authFailures.Rejected(pass, now)
}

// authorize runs authz.Decide for the request; topic is compared as bytes
// so that a matching request allocates nothing. On refusal it has answered
// with the reason's status and returns its code.
func (g *Gateway) authorize(ctx *fasthttp.RequestCtx, c *ocap.Claims, topic []byte, req authz.Request, now time.Time) (authz.Request, api.Code) {
	req.Topic = c.Topic
	if string(topic) != c.Topic {
		req.Topic = string(topic)
	}
	if code := g.decide(ctx, c, req, now); code != "" {
		return req, code
	}
	return req, g.refuseInternalTopic(ctx, req.Topic)
}

// decide runs authz.Decide and answers a refusal.
func (g *Gateway) decide(ctx *fasthttp.RequestCtx, c *ocap.Claims, req authz.Request, now time.Time) api.Code {
	r := authz.Decide(c, req, g.view, now)
	switch r {
	case authz.Allow:
	case authz.Expired: // when, for people (issue #13: not epoch seconds)
		writeError(ctx, r.Code(), r.Message()+": exp "+ocap.TimeText(c.ExpiresAt, now), nil)
	case authz.WrongTopic, authz.WrongPartition, authz.WrongOp, authz.OffsetOutsideRange:
		writeError(ctx, r.Code(), r.Message(), map[string]any{"capability": covers(c)})
	default:
		writeError(ctx, r.Code(), r.Message(), nil)
	}
	return r.Code()
}

// covers is what a capability covers, for a 403's details: its holder
// can decode the token anyway, and a client asking the wrong partition or
// op sees its mistake.
func covers(c *ocap.Claims) map[string]any {
	d := map[string]any{"topic": c.Topic, "partition": c.PartitionNumber(), "ops": c.Ops.Names()}
	if c.Offsets != nil {
		d["offset_from"] = c.Offsets.From
		if c.Offsets.To != 0 {
			d["offset_to"] = c.Offsets.To
		}
	}
	return d
}

// errNotReady: no token can be verified before the coordinator's settings
// arrived (the gateway refuses everything as not_ready until then).
var errNotReady = errors.New("gateway: not ready: the coordinator's settings have not arrived")

// syncRefusal is the 503 code while the gateway cannot vouch for its view
// (guard.Follower.Refusal): before the first sync (not_ready) and once
// sync_timeout passed since the last good poll was sent (out_of_sync); ""
// when in sync. While the coordinator refuses this gateway's id (409
// conflict: another process holds it, and its acknowledgements count
// for this id, so revocations complete without this gateway applying
// them) it is not_ready at once, not sync_timeout after its last good
// poll.
func (g *Gateway) syncRefusal(now time.Time) api.Code {
	if g.sync.refused.Load() != nil {
		return api.CodeNotReady
	}
	return g.follower.Refusal(now)
}

// refuseUnsynced answers 503 with Retry-After when the view is not
// trustworthy at now, and returns the code.
func (g *Gateway) refuseUnsynced(ctx *fasthttp.RequestCtx, now time.Time) api.Code {
	code := g.syncRefusal(now)
	if code == "" {
		return ""
	}
	setRetryAfter(ctx, time.Second)
	writeError(ctx, code, g.unsyncedMessage(code), nil)
	return code
}

// unsyncedMessage says why the view is not trustworthy (code from
// syncRefusal).
func (g *Gateway) unsyncedMessage(code api.Code) string {
	switch unfit := g.follower.Unfit(); {
	case code == api.CodeNotReady && g.refusedReason() != "":
		return "gateway not ready: " + g.refusedReason()
	case code == api.CodeOutOfSync:
		return "gateway lost its sync with the coordinator (sync_timeout passed)"
	case unfit != nil:
		return unfit.Error()
	}
	return "gateway has not synced with the coordinator yet"
}
