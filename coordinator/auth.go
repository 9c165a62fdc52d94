package coordinator

import (
	"errors"
	"fmt"
	"github.com/capgate/capgate/internal/failguard"
	"github.com/prometheus/client_golang/prometheus"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/internal/clientaddr"
	"github.com/capgate/capgate/ocap"
)

// Who may call what:
//
//	admin routes        an admin token (admin_token_hashes) and/or a client
//	                    certificate, per tls.admin (tls.go)
//	GET /v1/sync        a sync token (sync_token_hashes) and/or a client
//	                    certificate, per tls.sync
//	join                a client credential (ocap.KindClient) allowing the group and topics
//	heartbeat/commit/   a member token (ocap.KindMember) of the path's group;
//	leave/offsets       the member is its sub (offsets also takes an admin token)
//	attenuate           the parent capability (ocap.KindCapability)
//	jwks, healthz,      nobody: public
//	readyz, metrics
//
// Tokens are never logged: only claims (member ids, groups) appear in logs
// and error messages.

// bearer returns the token of an "Authorization: Bearer" header, or nil.
func bearer(ctx *fasthttp.RequestCtx) []byte { return bearerOf(&ctx.Request.Header) }

// bearerRequired is the answer to a request that sent no bearer token
// where it needs one (what: "member token"). An Authorization header
// without the Bearer scheme — curl -H "Authorization: $TOKEN" — is named:
// the answer said only "... required" to a request that sent one
// (newuser6).
func bearerRequired(ctx *fasthttp.RequestCtx, what string) string {
	if len(ctx.Request.Header.Peek(fasthttp.HeaderAuthorization)) > 0 {
		return what + " required: the Authorization header must be 'Bearer ' followed by the " + what
	}
	return what + " required"
}

// admin wraps h so it runs only for an admin: the admin token and/or
// client certificate tls.admin asks for (see tls.go), or the console's
// in-process call for an operator it logged in the same way. Each
// action (not a read) is then recorded in the audit log (audit.go).
func (c *Coordinator) admin(h handler) handler {
	return func(ctx *fasthttp.RequestCtx, params []string) {
		if fromConsole(ctx) || c.channelAuth(ctx, c.cfg.TLS.Admin, c.adminTokens, "admin") {
			h(ctx, params)
			c.recordAdmin(ctx, params)
		}
	}
}

// isAdmin reports, without answering, whether the request is an admin's.
func (c *Coordinator) isAdmin(ctx *fasthttp.RequestCtx) bool {
	ch := c.cfg.TLS.Admin
	return (!ch.NeedsCertificate() || ch.Allows(ctx.TLSConnectionState())) &&
		(!ch.NeedsToken() || c.adminTokens.matches(bearer(ctx)))
}

// verifyToken checks a token of kind, through the verified-token cache.
func (c *Coordinator) verifyToken(token []byte, kind ocap.Kind) (*ocap.Claims, error) {
	return c.verifyTokenFor(nil, token, kind)
}

// verifyTokenFor is verifyToken for a request: a token that needs its
// signature checked is checked within the budget of failed verifications
// of the request's client address (authFailures); nil ctx: no budget.
func (c *Coordinator) verifyTokenFor(ctx *fasthttp.RequestCtx, token []byte, kind ocap.Kind) (*ocap.Claims, error) {
	claims, err := c.signatureFor(budgetOf(ctx), token, kind)
	if err != nil {
		return nil, err
	}
	if err := c.revocations.refusal(claims, kind, c.now()); err != nil {
		return nil, err
	}
	if kind == ocap.KindClient && c.revokedOAuthSubject(claims.Subject) {
		return nil, errDenied
	}
	return claims, nil
}

// signatureFor is verifyTokenFor without the deny-list: the signature
// (through the verified-token cache), charged to budget b (budget{}: no
// budget).
func (c *Coordinator) signatureFor(b budget, token []byte, kind ocap.Kind) (*ocap.Claims, error) {
	now := c.now()
	if claims, ok := c.tokens.Get(token, now); ok {
		if claims.Kind() == kind {
			return claims, nil
		}
		// A genuine token of another kind (join tries a client
		// credential, then a member token; commit a capability, then a
		// member token): refused on its header, no signature checked, so
		// no budget asked — a rejoin with a cached member token was 429
		// while its address's budget was spent.
		return c.keys.verifier.Verify(string(token), kind, now)
	}
	t, err := c.authFailures.admit(b, token, now)
	if err != nil {
		return nil, err
	}
	claims, err := c.keys.verifier.Verify(string(token), kind, now)
	if err != nil {
		c.authFailures.rejected(t, now, err)
		return nil, err
	}
	c.authFailures.verifiedAs(t, failguard.HolderOf(claims.Issuer, claims.Subject, claims.Tenant), ownerOf(claims), now)
	c.tokens.Put(string(token), claims)
	return claims, nil
}

// writeTokenError answers a token that did not verify.
func writeTokenError(ctx *fasthttp.RequestCtx, what string, err error) {
	var spent *failguard.Spent
	switch {
	case errors.As(err, &spent):
		writeErrorDetails(ctx, api.CodeRateLimited, what+" not checked: "+err.Error()+" (auth_failures_per_second)",
			map[string]any{"retry_after_ms": spent.Wait.Milliseconds()})
		ctx.Response.Header.Set("Retry-After", strconv.FormatInt(int64((spent.Wait+time.Second-1)/time.Second), 10))
		return
	case errors.Is(err, ocap.ErrExpired):
		// "… expired: exp 2026-12-03T03:04:05Z, 3m ago" (ocap.TimeText)
		writeError(ctx, api.CodeTokenExpired, what+" "+strings.TrimPrefix(err.Error(), "ocap: token ")+expiredHint(what))
		return
	case errors.Is(err, errDenied):
		writeError(ctx, api.CodeCapabilityRevoked, what+" refused: "+err.Error())
		return
	}
	writeError(ctx, api.CodeUnauthorized, what+" refused: "+err.Error())
}

// expiredHint says where a fresh one of what comes from, for the tokens
// a user hands in (the SDK renews member tokens itself); the answer said
// only when it expired.
func expiredHint(what string) string {
	switch what {
	case "client credential":
		return ": use a fresh one (capgate admin client-credential mints one, with a --ttl of its lifetime; an OAuth client's comes from POST /oauth/token)"
	case "identity token":
		return ": get a fresh token from your IdP"
	}
	return ""
}

// writeMemberTokenError answers a member token that did not verify: as
// writeTokenError, but a token of a member an administrator revoked is
// 409 unknown_member whatever the route (heartbeat, commit, leave, a
// rejoin with it) — one answer a client acts on by its status alone:
// join again with a client credential. A rejoin answered it 401.
func writeMemberTokenError(ctx *fasthttp.RequestCtx, err error) {
	if errors.Is(err, errMemberRevoked) {
		writeErrorDetails(ctx, api.CodeUnknownMember, "member token refused: "+err.Error(),
			map[string]any{api.DetailRemoved: api.RemovedRevoked})
		return
	}
	writeTokenError(ctx, "member token", err)
}

// unconfiguredIssuer answers 401 for a join's bearer whose unverified
// iss is neither this coordinator's (cfg.ID) nor a configured OIDC
// issuer: before, such a token went to the client-credential verifier
// and was refused as a broken client credential ("malformed claims:
// unknown claim groups"), which told a user wiring up their IdP nothing
// about issuers. The answer names the token's iss (bounded, quoted) and
// a configured issuer it misses only by a trailing slash. Nothing is
// verified, so the refusal costs no signature; it is counted and
// budgeted like any failed token.
func (c *Coordinator) unconfiguredIssuer(ctx *fasthttp.RequestCtx, token []byte) bool {
	refusal := c.identities.Unconfigured(token, c.cfg.ID)
	if refusal == nil {
		return false
	}
	now := c.now()
	if err := c.authFailures.check(budgetOf(ctx), now); err != nil {
		writeTokenError(ctx, "token", err)
		return true
	}
	c.authFailures.failed(budgetOf(ctx), now, refusal)
	writeError(ctx, api.CodeUnauthorized, "token refused: "+strings.TrimPrefix(refusal.Error(), "identity: token refused: "))
	return true
}

// credentialName is what a join's verified bearer is called in answers:
// capgate's client credential, or an IdP's token (oidc issuers).
func credentialName(credential *ocap.Claims) string {
	if credential.Kind() == ocap.KindClient {
		return "client credential"
	}
	return "identity token"
}

// bearerClaims verifies the bearer token as kind, answering 401 on failure.
func (c *Coordinator) bearerClaims(ctx *fasthttp.RequestCtx, kind ocap.Kind, what string) (*ocap.Claims, bool) {
	token := bearer(ctx)
	if token == nil {
		writeError(ctx, api.CodeUnauthorized, what+" required")
		return nil, false
	}
	claims, err := c.verifyTokenFor(ctx, token, kind)
	if err != nil {
		writeTokenError(ctx, what, err)
		return nil, false
	}
	return claims, true
}

// memberClaims verifies a member token for groupName: 401 if it does not
// verify, 403 if it belongs to another group, 409 unknown_member if an
// administrator revoked its member. The member id is its sub.
func (c *Coordinator) memberClaims(ctx *fasthttp.RequestCtx, groupName string) (*ocap.Claims, bool) {
	token := bearer(ctx)
	if token == nil {
		writeError(ctx, api.CodeUnauthorized, bearerRequired(ctx, "member token"))
		return nil, false
	}
	claims, err := c.verifyTokenFor(ctx, token, ocap.KindMember)
	switch {
	case err != nil:
		writeMemberTokenError(ctx, err)
		return nil, false
	case claims.Group != groupName:
		writeError(ctx, api.CodeForbidden, "member token is for another group")
		return nil, false
	}
	return claims, true
}

// topicRule says ocap.ValidTopic's rule (Kafka's) in words.
const topicRule = `1 to 249 characters from a-z, A-Z, 0-9, '.', '_' and '-' (Kafka's rule), and not "." or ".."`

// groupParam validates a group name from the path (400 if invalid).
func groupParam(ctx *fasthttp.RequestCtx, name string) bool {
	if !ocap.ValidName(name) {
		writeError(ctx, api.CodeBadRequest, fmt.Sprintf("invalid group name %.80q: a group name is %s", name, ocap.NameRule))
		return false
	}
	return true
}

// topicParam validates a topic from the path (400 saying the rule).
func topicParam(ctx *fasthttp.RequestCtx, topic string) bool {
	if !ocap.ValidTopic(topic) {
		writeError(ctx, api.CodeBadRequest, fmt.Sprintf("invalid topic name %.80q in the path: a topic is %s", topic, topicRule))
		return false
	}
	return true
}

// partitionParams validates a topic and partition from the path; the
// partition in its one spelling, as on the gateway (api.ParsePartition:
// /partitions/demo/03/revoke is 400, not partition 3).
func partitionParams(ctx *fasthttp.RequestCtx, topic, partition string) (int32, bool) {
	if !topicParam(ctx, topic) {
		return 0, false
	}
	p, ok := api.ParsePartition(partition)
	if !ok {
		writeError(ctx, api.CodeBadRequest, fmt.Sprintf("partition %.32q in the path: %s", partition, api.PartitionRule))
		return 0, false
	}
	return p, true
}

// memberRequest is the preamble of the member routes (heartbeat, commit,
// leave): the {group} path parameter, the member token of that group, and
// the JSON body into req (empty allowed when emptyOK). On a refusal it
// writes the answer and returns ok false.
func (c *Coordinator) memberRequest(ctx *fasthttp.RequestCtx, params []string, req any, emptyOK bool) (string, *ocap.Claims, bool) {
	groupName := params[0]
	if !groupParam(ctx, groupName) {
		return "", nil, false
	}
	claims, ok := c.memberClaims(ctx, groupName)
	if !ok || !decodeBody(ctx, req, emptyOK) {
		return "", nil, false
	}
	return groupName, claims, true
}

// authFailureAddresses bounds the client addresses whose failed
// verifications are tracked (internal/failguard: past it new addresses
// share one budget).
const authFailureAddresses = 1 << 16

// authFailures budgets failed token verifications per client address
// (auth_failures_per_second, auth_failure_burst): a forged token costs a
// signature check and is never cached, so without it anyone could spend
// the coordinator's CPU — its heartbeats and joins — with no credential.
type authFailures struct {
	guard     *failguard.Guard
	proxies   clientaddr.Proxies // whose X-Forwarded-For names the client
	failures  prometheus.Counter
	throttled prometheus.Counter
}

// newAuthFailures budgets failed verifications per client address
// (auth_failures_per_second, auth_failure_burst) with the known-holder
// path (failguard.Holders): once an address's budget is spent, a token of
// a holder verified from it before — a member token's member, a client
// credential's name, an IdP token's issuer and subject, a capability's
// holder — is still checked, on a tenth of that budget (burst at least
// 1) per (address, holder); 256 holders an address, 65,536 in all, each
// remembered a day after it last verified.
func newAuthFailures(perSecond float64, burst int, proxies clientaddr.Proxies) *authFailures {
	guard := failguard.New(perSecond, burst, authFailureAddresses).Remember(failguard.Holders{
		PerSecond: perSecond / 10, Burst: max(burst/10, 1), PerAddress: 256, Max: 1 << 16, TTL: 24 * time.Hour})
	return &authFailures{
		guard: guard, proxies: proxies,
		failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "capgate_coordinator_auth_failures_total",
			Help: "Tokens (client credentials, IdP tokens, member tokens, capabilities) that failed verification."}),
		throttled: prometheus.NewCounter(prometheus.CounterOpts{Name: "capgate_coordinator_auth_throttled_total",
			Help: "Tokens refused unchecked (429 rate_limited) because their client address had spent its failed verifications (auth_failures_per_second)."}),
	}
}

func (a *authFailures) register(r *prometheus.Registry) {
	r.MustRegister(a.failures, a.throttled, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "capgate_coordinator_auth_failure_addresses",
		Help: "Client addresses (IPv6: /64s) whose failed verifications the coordinator tracks (at most 65,536)."},
		func() float64 { return float64(a.guard.Len()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "capgate_coordinator_auth_known_holder_admitted_total",
			Help: "Tokens checked although their client address had spent its failed verifications, because their holder had verified from that address before."},
			func() float64 { return float64(a.guard.Stats().Admitted) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "capgate_coordinator_auth_known_holder_throttled_total",
			Help: "Tokens of such a known holder refused unchecked (429 rate_limited) because that holder's own budget of failures at the address was spent too."},
			func() float64 { return float64(a.guard.Stats().Refused) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "capgate_coordinator_auth_known_holders",
			Help: "Holders remembered as verified from a client address (at most 65,536; 256 an address)."},
			func() float64 { return float64(a.guard.Stats().Holders) }))
}

// budget is whose failures a token check is charged to: none (the zero
// value: a check outside any request), a request's client address, or
// the one budget of the pre-auth body check (preauth). The address is
// read only on a cache miss, when a check needs it.
type budget struct {
	ctx     *fasthttp.RequestCtx
	preauth bool
}

// clientAddr is the address ctx comes from: its connection's, or behind
// trusted_proxies the client X-Forwarded-For names (IPv4 as IPv4; the
// zero Addr, a key of its own, if it has none). Read it where it is
// needed — a failure, a miss — not on every request.
func (c *Coordinator) clientAddr(ctx *fasthttp.RequestCtx) netip.Addr {
	return c.proxies.Request(ctx)
}

// budgetOf is the budget of ctx's client (none for a nil ctx).
func budgetOf(ctx *fasthttp.RequestCtx) budget { return budget{ctx: ctx} }

// addr is b's key (a request's client through proxies); false for no
// budget.
func (b budget) addr(proxies clientaddr.Proxies) (netip.Addr, bool) {
	switch {
	case b.preauth:
		return netip.Addr{}, true
	case b.ctx != nil:
		return proxies.Request(b.ctx), true
	}
	return netip.Addr{}, false
}

// check is nil while b may still have a token verified (always for no
// budget).
func (a *authFailures) check(b budget, now time.Time) error {
	from, ok := b.addr(a.proxies)
	if !ok {
		return nil
	}
	err := a.guard.Check(from, now)
	if err != nil {
		a.throttled.Inc()
	}
	return err
}

// failed charges a failed verification to b. A token of another kind
// fails on its header, before any signature, and is not charged (commit
// tries a capability first, then a member token).
func (a *authFailures) failed(b budget, now time.Time, err error) {
	from, ok := b.addr(a.proxies)
	if !ok || errors.Is(err, ocap.ErrBadType) {
		return
	}
	a.failures.Inc()
	a.guard.Failed(from, now)
}

// ticket is leave to verify one token (admit): budgeted unless the check
// is outside any request.
type ticket struct {
	from     netip.Addr
	pass     failguard.Pass
	budgeted bool
}

// admit is a ticket while b may still have token verified: within b's address's budget, or past it for a holder verified
// from that address before (failguard.Guard.Admit); always for no
// budget.
func (a *authFailures) admit(b budget, token []byte, now time.Time) (ticket, error) {
	from, ok := b.addr(a.proxies)
	if !ok {
		return ticket{}, nil
	}
	pass, err := a.guard.Admit(from, string(token), now)
	if err != nil {
		a.throttled.Inc()
		return ticket{}, err
	}
	return ticket{from: from, pass: pass, budgeted: true}, nil
}

// rejected charges t's failed verification as failed does: to its
// address, or to the known holder it was admitted for.
func (a *authFailures) rejected(t ticket, now time.Time, err error) {
	if !t.budgeted || errors.Is(err, ocap.ErrBadType) {
		return
	}
	a.failures.Inc()
	a.guard.Rejected(t.pass, now)
}

// verified remembers h, the holder of t's token, as verified from its
// address (its own owner: failguard.Guard.Verified).
func (a *authFailures) verified(t ticket, h failguard.Holder, now time.Time) {
	a.verifiedAs(t, h, h, now)
}

// verifiedAs is verified for a holder owned by owner if new there
// (failguard.Guard.VerifiedAs).
func (a *authFailures) verifiedAs(t ticket, h, owner failguard.Holder, now time.Time) {
	if t.budgeted {
		a.guard.VerifiedAs(t.from, h, owner, now)
	}
}

// ownerOf is who owns the holder of claims, a verified token, when it
// is new at an address: itself (a capability's tenant, a client
// credential's name, an IdP identity) — except a member token's member,
// which its tenant multiplies at will by joining: those share
// failguard.Pool, so they make room among themselves only.
func ownerOf(claims *ocap.Claims) failguard.Holder {
	if claims.Kind() == ocap.KindMember {
		return failguard.Pool
	}
	return failguard.HolderOf(claims.Issuer, claims.Subject, claims.Tenant)
}

// joinTenant is the tenant owning a join's new member at the join's
// address (vouch): the joining credential's (tenant) — "" for a rejoin
// with a member token, whose member is then owned by failguard.Pool
// (ownerOf).
func joinTenant(credential *ocap.Claims, byMember bool) string {
	if byMember {
		return ""
	}
	return tenant(credential)
}

// vouch remembers the holder of claims, a member token the coordinator
// just minted in answer to ctx's authenticated join, as verified from
// ctx's client address: a join's new member then has its first member
// token checked even while a neighbour at that address keeps the
// address's budget spent. It is owned by joiner, the joining
// credential's tenant (joinTenant), so one credential's joins, however
// many, make room among their own members and never push out another's
// holders (redteam8 #1). The tenant itself — the holder of the
// capabilities the join grants (tnt) — is remembered too.
func (c *Coordinator) vouch(ctx *fasthttp.RequestCtx, claims *ocap.Claims, joiner string) {
	owner := failguard.Pool
	if joiner != "" {
		owner = failguard.HolderOf(claims.Issuer, "", joiner)
	}
	from, ok := budgetOf(ctx).addr(c.authFailures.proxies)
	if !ok {
		return
	}
	now := c.now()
	c.authFailures.guard.VerifiedAs(from, failguard.HolderOf(claims.Issuer, claims.Subject, claims.Tenant), owner, now)
	if joiner != "" { // its capabilities' holder (tnt), for a commit's
		c.authFailures.guard.Verified(from, owner, now)
	}
}
