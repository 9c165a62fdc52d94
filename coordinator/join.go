package coordinator

// Behavior: POST /v1/groups/{group}/join — bearer: a client credential
// (ocap.KindClient) whose grps allow the group (else 403) and whose tps
// allow every listed topic (else 403); a topic_pattern needs a credential
// for any topic ("*"). The body is api.JoinRequest. The member is bound to
// the credential (its jti, iss and sub; admin views show it): member_id
// rejoins a known member only with that same credential, or with the
// member's own member token as bearer (member_id = its sub; the
// subscription may not change then). A rejoin from any other credential
// is answered as for an unknown member (409 unknown_member), and a rejoin
// always fences: every partition the member owns is revoked and granted
// to it again under a fresh epoch, arriving in heartbeats. So a member id
// learnt from a capability's sub opens nothing, and no capability is ever
// minted twice for one epoch. With renew_token — the member's own member
// token beside the credential — the rejoin renews the member in place
// instead: same subscription, no fence, the member's capabilities
// renewed in the answer under their epochs (checkRenewToken; the SDK's
// credential renewal). A denied credential (or a member token of a
// member whose credential was denied) gets 409 capability_revoked. The
// answer is api.JoinResponse with a member token (sub = member id, grp =
// group, ttl member_token_ttl but expiring no later than the bearer:
// the credential on a join, the presenting member token on a rejoin with
// it — so no member token outlives the credential its member was joined
// with; under a second left is 401 token_expired, as is an expired
// member token on a rejoin — a token of neither kind is 401 unauthorized
// saying what a join takes, and the admin token or a sync token 401
// saying which it is; a member token of a member an administrator
// revoked is 409 unknown_member, as on its other routes) and the grants the member may use at once;
// partitions still held by others arrive later in heartbeats. Unlike
// Kafka there is no join barrier: the answer comes at once. A listed topic
// Kafka does not have is 404 not_found (join_topics.go). A join (not a
// renewal, which pays before: admitRenewal) owes its tenant's
// tenant_member_rate a token per capability its answer mints, and waits,
// up to 5 s, until that bucket is out of debt first, else 429 naming
// coordinator.tenant_member_rate (tenantshare.go awaitDebt); grants past
// what the rate pays (at most tenant_member_burst ahead) come in the
// member's heartbeats instead (paceMints). A topic_pattern is matched
// against every topic here, in the join's goroutine, not in the loop
// (patterns.go: one at a time per tenant, its others waiting among its
// tenant_loop_waiters up to 5 s, else 429; the work owed to its
// tenant_member_rate); the loop matches only the topics changed since.
//
// A new member's id is its client_id (or "member") cut to 238 characters,
// "-" and 16 random hex digits: at most 255 characters, a name whatever
// the client_id, so its member token can carry it and an admin can name
// it. member_id, instance_id and client_id must themselves be names (1-255
// printable characters without '/', not . or ..; else 400). The join is
// all or nothing: when its answer cannot be made (minting the member
// token or a grant failed) the member it created is removed again before
// the 500 internal, and the cause is logged at ERROR.
//
// A join may carry a key (header Idempotency-Key, api.JoinKey: 1-128
// printable ASCII characters, optionally quoted; else 400 naming the
// header), the same on every attempt of one join. A join without
// member_id whose key an earlier attempt with the same credential into
// the same group made a member with — one given up by the client on a
// leader that was only slow, yet written — is answered that member,
// stepped as its rejoin (fenced, as any rejoin), instead of making a
// second one that nobody heartbeats and that holds its share of the
// partitions until session_timeout. The key becomes the member's id
// (group.Join.JoinKey): nothing else is kept, so what it costs is
// bounded by the members a tenant may have, it expires with its member
// (a repeat after the member left or expired joins a new one), and a
// replica that takes over maps it from the member it read from the
// log. Another credential's key never names the member. With member_id
// the key is ignored. Coordinators older than keys ignore the header.

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/group"
	"github.com/capgate/capgate/internal/failguard"
	"github.com/capgate/capgate/ocap"
)

func (c *Coordinator) handleJoin(ctx *fasthttp.RequestCtx, params []string) {
	arrived := c.now() // group.Join.Arrived: how slow the shell is (the join window waits for it)
	groupName := params[0]
	if !groupParam(ctx, groupName) {
		return
	}
	credential, byMember, ok := c.joinBearer(ctx, groupName)
	if !ok {
		return
	}
	if ok, wait := c.joins.allow(c.joinRateKey(credential, byMember, groupName), c.now()); !ok {
		// The settings are named: a fleet of one service (one OAuth
		// client, one credential) larger than join_burst starting at once
		// meets this, and its operator needs to know what to raise.
		whose := "this credential's tenant (its OAuth client, IdP identity, or the credential)"
		if byMember {
			whose = "this member (rejoins with its member token)"
		}
		writeLoopShareRefusal(ctx, fmt.Sprintf("too many joins of %s: more than %d at once or %g a second (coordinator.join_burst, join_rate); retry later",
			whose, c.cfg.JoinBurst, c.cfg.JoinRate), "coordinator.join_burst", c.cfg.JoinBurst, wait)
		return
	}
	var req api.JoinRequest
	if !decodeBody(ctx, &req, false) || !checkJoinSyntax(ctx, req) || !c.checkSessionTimeout(ctx, req.SessionTimeoutMs) {
		return
	}
	joinKey, problem := api.JoinKey(ctx.Request.Header.PeekAll(api.HeaderIdempotencyKey))
	if problem != "" {
		writeErrorDetails(ctx, api.CodeBadRequest, problem, map[string]any{"header": api.HeaderIdempotencyKey})
		return
	}
	if req.RenewToken != "" && (!c.checkRenewToken(ctx, groupName, req, byMember) || !c.admitRenewal(ctx, groupName, req.MemberID, c.renewalTenant(groupName, req.MemberID, credential))) {
		return
	}
	if byMember {
		if req.MemberID != credential.Subject {
			writeError(ctx, api.CodeUnauthorized, "a member token only rejoins its own member (member_id = its sub); a new member needs a client credential")
			return
		}
		if !c.admitRejoin(ctx, groupName, credential.Subject, c.share.memberTenant(groupName, credential.Subject)) {
			return
		}
	} else if !checkJoinScope(ctx, credential, groupName, req) {
		return
	} else if req.MemberID != "" && req.RenewToken == "" && !c.admitRejoin(ctx, groupName, req.MemberID, c.rejoinTenant(groupName, req.MemberID, credential)) {
		return
	} else if id := keyedRepeat(groupName, credential, req, joinKey); id != "" && c.share.memberTenant(groupName, id) == tenant(credential) &&
		!c.admitRejoin(ctx, groupName, id, tenant(credential)) {
		// A keyed join repeated while the member its first attempt made
		// lives is that member's rejoin (group.keyedMember): it fences
		// every partition the member owns, so it is priced as one — a
		// client repeating one key could otherwise fence all its member
		// holds at join_rate, outside the tenant's rate. A first attempt
		// (no such member of the tenant) is no rejoin and spends nothing
		// of the rate: priced as a rejoin of nothing, it was 429 "a rejoin
		// fences each partition its member owns (0)" whenever its
		// tenant's bucket was empty (a large read's debt), where the same
		// join without a key was admitted (review20).
		return
	}
	arriving := c.joining.enter(groupName) // until its event is built (a parked opener's handler waits on)
	defer arriving()
	if !c.grantableTopics(ctx, req.Topics) || !c.knownTopics(ctx, req.Topics) {
		return
	}
	// A renewal paid for what it mints (admitRenewal); any other join
	// waits for its tenant's debt and pays for its grants after.
	payer := ""
	if req.RenewToken == "" {
		payer = tenant(credential)
		if byMember {
			payer = c.share.memberTenant(groupName, credential.Subject)
		}
		waitFrom := c.now()
		if !c.share.awaitDebt(ctx, payer, c.loop.done) {
			return
		}
		arrived = arrived.Add(c.now().Sub(waitFrom)) // the debt's wait was on purpose, not slowness
	}
	memberTTL, ok := c.memberTokenTTL(ctx, credential, byMember)
	if !ok {
		return
	}
	var matched *group.PatternMatch // the pattern matched here, not in the loop (patterns.go)
	if req.TopicPattern != "" {
		matcher := payer
		if matcher == "" {
			matcher = tenant(credential) // a renewal's
		}
		if matched, ok = c.matchPattern(ctx, matcher, req.TopicPattern); !ok {
			return
		}
	}
	weight := len(req.Topics)
	switch {
	case matched != nil:
		// What it matched a moment ago (topics created since are few):
		// a pattern join batches with others as a list of those topics
		// would, instead of a persist of its own each — under load, each
		// a flush every other tenant's requests waited for.
		weight = min(max(matched.Count(), 1), c.cfg.Groups.Limits.TopicsPerMember)
	case req.TopicPattern != "":
		weight = c.cfg.Groups.Limits.TopicsPerMember // refused by the machine: alone
	}
	renewFrom := c.renewFrom(ctx, credential, req)
	msg, err := c.callWeighted(weight, func(ref group.Ref) group.Event {
		arriving()
		return group.Join{
			Ref: ref, Group: groupName, MemberID: req.MemberID, InstanceID: req.InstanceID, ClientID: req.ClientID,
			Topics: req.Topics, TopicPattern: req.TopicPattern,
			SessionTimeout: msDuration(req.SessionTimeoutMs), Assignor: req.Assignor,
			Credential:    group.Credential{ID: credential.ID, Issuer: credential.Issuer, Subject: credential.Subject},
			ByMemberToken: byMember, Renew: req.RenewToken != "", RenewFrom: renewFrom, Tenant: tenant(credential), JoinKey: joinKey,
			Arrived: arrived, Concurrent: c.joining.count(groupName), Matched: matched,
		}
	})
	reply, ok := msg.(group.JoinReply)
	if !ok {
		writeMachineError(ctx, msg, err)
		return
	}
	joiner := joinTenant(credential, byMember)
	if req.RenewToken != "" && !byMember {
		// Its capabilities carry the member's tenant (tnt), which a
		// renew_credential rebind keeps: vouch for that holder, not the
		// bearer's (TestRenewalOfAReboundMemberVouchesForItsTenant).
		joiner = c.renewalTenant(groupName, reply.MemberID, credential)
	}
	c.answerJoin(ctx, reply, memberTTL, reply.Created, joiner, payer, c.matchCount(matched))
}

// joinsInFlight counts the joins of each group on their way to the
// loop — past their bearer's and scope's checks (a credential allowing
// the group, or its member token), their event not yet built: an empty group's join window waits for
// them (group.Join.Concurrent) — a loaded shell brings a crowd's joins
// to the loop more than initial_assign_delay after the first, and the
// window closed on its first member alone, granted every partition.
// Bounded by the requests in flight; a group's entry goes with its last
// join.
type joinsInFlight struct {
	mu sync.Mutex
	n  map[string]int
}

// enter counts a join of group; the func returned uncounts it (once,
// however often it is called).
func (j *joinsInFlight) enter(group string) func() {
	j.mu.Lock()
	if j.n == nil {
		j.n = make(map[string]int)
	}
	j.n[group]++
	j.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			j.mu.Lock()
			if j.n[group]--; j.n[group] <= 0 {
				delete(j.n, group)
			}
			j.mu.Unlock()
		})
	}
}

// count is how many joins of group are on their way now.
func (j *joinsInFlight) count(group string) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.n[group]
}

// checkRenewToken verifies a renewal's renew_token (api.JoinRequest): a
// client credential or IdP token as the bearer, and the member's own
// current member token for member_id of this group. Whoever holds a
// member's token is the member (its heartbeats and commits take nothing
// else), so a renewal with it takes no fence; a credential alone still
// rejoins only with one (a member id learnt from a capability's sub
// opens nothing). Expired: 401 token_expired (the member renews as a new
// one); a revoked member's: 409 unknown_member, as on its other routes.
func (c *Coordinator) checkRenewToken(ctx *fasthttp.RequestCtx, groupName string, req api.JoinRequest, byMember bool) bool {
	switch {
	case byMember:
		writeErrorDetails(ctx, api.CodeBadRequest, "renew_token renews a member with a client credential (or IdP token) as the bearer, not its member token",
			map[string]any{"field": "renew_token"})
		return false
	case req.MemberID == "":
		writeErrorDetails(ctx, api.CodeBadRequest, "renew_token needs member_id: the member it renews (its member token's sub)",
			map[string]any{"field": "member_id"})
		return false
	}
	member, err := c.verifyTokenFor(ctx, []byte(req.RenewToken), ocap.KindMember)
	if errors.Is(err, ocap.ErrExpired) {
		member, err = c.renewTokenInGrace([]byte(req.RenewToken), ocap.KindMember, err)
	}
	if err != nil {
		if errors.Is(err, errMemberRevoked) {
			writeMemberTokenError(ctx, err)
		} else {
			writeTokenError(ctx, "renew_token (the member's member token)", err)
		}
		return false
	}
	if member.Subject != req.MemberID || member.Group != groupName {
		writeErrorDetails(ctx, api.CodeForbidden, "renew_token is the member token of another member or group: it renews only its own member (member_id = its sub)",
			map[string]any{"field": "renew_token"})
		return false
	}
	return true
}

// renewTokenInGrace verifies an expired token of a renewal again — its
// renew_token (a member token) or its renew_credential (the admin-minted
// credential the member is bound to, renewFrom) — taking it up to
// groups.renew_token_grace past its expiry (beyond the leeway), and
// checks it against the revocations as any token (the deny-list and the
// revoked members keep their entries that much longer:
// revocation.Rule.Retain). It returns expired, the first verification's
// error, when the grace is off or passed. A renewal is the only use of
// it, and safe only with the rest of what a renewal takes: a bearer
// verified in full as a client credential (never a member token:
// checkRenewToken), bound to the member (the machine's rejoin: the same
// credential, another token of its OAuth client, the same IdP identity,
// or a renew_credential it is bound to beside a fresh one of the same
// issuer and name), and the member still live in the machine (an
// administrator's revoke, its credential's deny, its group's delete or
// its session's end removed it: unknown_member). So a revoked
// credential's member is not renewed inside the grace. It lets a Kafka
// client's re-authentication that met a takeover land after the member
// token — and the credential it expired with — expired
// (TestRenewalInGraceKeepsTheMember,
// TestRenewalInGraceRebindsAnAdminMintedCredentialsMember).
func (c *Coordinator) renewTokenInGrace(token []byte, kind ocap.Kind, expired error) (*ocap.Claims, error) {
	grace := c.cfg.Groups.RenewTokenGrace
	if grace <= 0 {
		return nil, expired
	}
	now := c.now()
	claims, err := c.keys.verifier.VerifyExpiredWithin(string(token), kind, now, grace)
	if err != nil {
		return nil, expired
	}
	// As at the instant the grace reaches back to: every entry that held
	// then is kept (revocation.Rule.Retain), one made since too.
	if err := c.revocations.refusal(claims, kind, now.Add(-grace)); err != nil {
		return nil, err
	}
	if kind == ocap.KindClient && c.revokedOAuthSubject(claims.Subject) {
		return nil, errDenied
	}
	return claims, nil
}

// renewalTenant is whose tenant_member_rate a renewal spends
// (admitRenewal), and whom its answer vouches for (vouch): its member's
// tenant — checkRenewToken proved the
// renewal holds the member's own member token, and its answer mints a
// capability again for every partition the member owns — or, for a
// member not live here, the bearer's. The bearer's tenant was asked
// always: a member rebound by renew_credential to another admin-minted
// credential keeps its old tenant, so every later renewal by its bound
// credential was "another tenant's member", one token of the new
// credential's own bucket, and the machine took it and minted every
// partition again (TestRenewalOfAReboundMemberIsPricedAsItsTenants).
func (c *Coordinator) renewalTenant(groupName, member string, credential *ocap.Claims) string {
	if t := c.share.memberTenant(groupName, member); t != unknownTenant {
		return t
	}
	return tenant(credential)
}

// rejoinTenant is whose tenant_member_rate a rejoin naming member with a
// client credential spends (admitRejoin): the member's tenant when the
// member is bound to that credential — one rebound by renew_credential
// to another admin-minted credential keeps its old tenant, and its
// bound credential's rejoins were "another tenant's member", one token
// of the credential's own bucket, while the machine took them and
// fenced every partition the member owns
// (TestRejoinOfAReboundMemberIsPricedAsItsTenants) — else the
// credential's (another tenant's member: the machine refuses it).
func (c *Coordinator) rejoinTenant(groupName, member string, credential *ocap.Claims) string {
	if t, bound, ok := c.share.index.Bound(groupName, member); ok && bound == credential.ID {
		return t
	}
	return tenant(credential)
}

// renewFrom is the id of a renewal's renew_credential (api.JoinRequest)
// when it verifies as a client credential of the bearer's issuer and
// name other than the bearer (group.Join.RenewFrom); "" otherwise — it
// then proves nothing, and the renewal is as without it (a member bound
// to another credential is unknown_member: the client renews anew).
func (c *Coordinator) renewFrom(ctx *fasthttp.RequestCtx, credential *ocap.Claims, req api.JoinRequest) string {
	if req.RenewToken == "" || req.RenewCredential == "" {
		return ""
	}
	old, err := c.verifyTokenFor(ctx, []byte(req.RenewCredential), ocap.KindClient)
	if errors.Is(err, ocap.ErrExpired) {
		// The member token is never longer-lived than the credential it
		// was minted under (memberTokenTTL): a carry-over whose renewal
		// token is in the grace has a renew_credential in it too.
		old, err = c.renewTokenInGrace([]byte(req.RenewCredential), ocap.KindClient, err)
	}
	if err != nil || old.ID == credential.ID || old.Issuer != credential.Issuer || old.Subject != credential.Subject {
		return ""
	}
	return old.ID
}

// joinRateKey is whose join_rate budget a join spends: its tenant's; a
// member token's rejoin its member's. An OAuth client may hold
// oauth.live_tokens_max credentials at once, and with a budget each it
// joined live_tokens_max times join_rate (50,000 joins a second, each a
// persisted Ready, at the defaults).
func (c *Coordinator) joinRateKey(credential *ocap.Claims, byMember bool, groupName string) string {
	if byMember {
		return "member:" + groupName + "/" + credential.Subject
	}
	return tenant(credential)
}

// tenant is the identity a client credential or IdP token stands for,
// which its holder cannot multiply by obtaining more credentials: the
// unit of join_rate and of the groups a join creates
// (limits.groups_per_credential, group.Join.Tenant).
//   - /oauth/token's credentials (sub "oauth:<client_id>"): the OAuth
//     client — it mints up to oauth.live_tokens_max of them itself.
//   - an IdP token: its identity id (issuer and subject, identity.IdentityID;
//     claims.ID already) — the IdP hands the subject a fresh token every
//     few minutes.
//   - a credential an admin minted (POST /v1/admin/clients, capgate dev):
//     that credential (its jti) — each is an admin's act, as registering
//     an OAuth client is, and its name is a free label: credentials named
//     alike may be for different groups and holders.
//
// Client credentials are never attenuated (ocap.Attenuate takes
// capabilities only); /oauth/token's narrower scopes are the client's.
// Only capgate's own credentials (ocap.KindClient) are read for the
// oauth: subject: an IdP's subject could be spelled so too.
func tenant(credential *ocap.Claims) string {
	if credential.Kind() == ocap.KindClient && strings.HasPrefix(credential.Subject, oauthSubject) {
		return credential.Subject
	}
	return credential.ID
}

// memberTokenTTL is the lifetime of the member token a join answers:
// member_token_ttl, but never beyond the bearer's own expiry — the client
// credential's (or IdP token's) on a join, the presenting member token's
// on a rejoin with it. Before, a join answered a full member_token_ttl
// whatever the credential's expiry, so a consumer whose 5-minute IdP
// token lapsed went on heartbeating, taking capabilities and reading for
// up to 24 h; and each rejoin with the member token answered a fresh
// one, so it lived on for ever. A bearer with less than a second left is
// refused (401 token_expired): join with a fresh credential.
func (c *Coordinator) memberTokenTTL(ctx *fasthttp.RequestCtx, bearer *ocap.Claims, byMember bool) (time.Duration, bool) {
	left := time.Unix(int64(bearer.ExpiresAt), 0).Sub(c.now())
	if left < time.Second {
		// One expired within the clock leeway verified: say it expired,
		// not that it "expires within a second" (newuser5) — and not
		// "(within the clock leeway)", which read as a reason it should
		// have been taken (newuser12).
		when := "expires within a second"
		if left <= 0 {
			when = "expired " + (-left).Truncate(time.Second).String() + " ago"
		}
		what := credentialName(bearer) + " " + when + ": join with a fresh one"
		if byMember {
			what = "member token " + when + ": join with the client credential"
		}
		writeError(ctx, api.CodeTokenExpired, what)
		return 0, false
	}
	return min(left, c.cfg.MemberTokenTTL), true
}

// joinBearer verifies the join's bearer: a client credential, or else a
// member token of groupName (byMember). On failure it writes the answer.
func (c *Coordinator) joinBearer(ctx *fasthttp.RequestCtx, groupName string) (*ocap.Claims, bool, bool) {
	token := bearer(ctx)
	if token == nil {
		writeError(ctx, api.CodeUnauthorized, bearerRequired(ctx, "client credential"))
		return nil, false, false
	}
	if c.identities.Handles(token) {
		claims, ok := c.identityClaims(ctx, token)
		return claims, false, ok
	}
	if c.unconfiguredIssuer(ctx, token) {
		return nil, false, false
	}
	claims, err := c.verifyTokenFor(ctx, token, ocap.KindClient)
	if err == nil {
		return claims, false, true
	}
	if errors.Is(err, ocap.ErrBadType) {
		member, merr := c.verifyTokenFor(ctx, token, ocap.KindMember)
		switch {
		case merr == nil:
			if member.Group != groupName {
				writeError(ctx, api.CodeForbidden, "member token is for another group")
				return nil, false, false
			}
			return member, true, true
		case !errors.Is(merr, ocap.ErrBadType):
			// A member token that does not verify (expired, most often:
			// 401 token_expired, join with the credential) is reported
			// as what it is, not as "wrong type" for a credential; a
			// revoked member's as on its other routes (409).
			writeMemberTokenError(ctx, merr)
			return nil, false, false
		}
		writeError(ctx, api.CodeUnauthorized, "a join takes a client credential (or an identity provider's token), or this group's member token to rejoin; this token is neither")
		return nil, false, false
	}
	if what := c.operatorToken(token, err); what != "" {
		writeError(ctx, api.CodeUnauthorized, "this is "+what+": joins take a client credential (capgate admin client-credential mints one)")
		return nil, false, false
	}
	writeTokenError(ctx, "client credential", err)
	return nil, false, false
}

// operatorToken names the coordinator's own secret a join's bearer is —
// "the admin token", "a sync token" — or "": a first-day user who joins
// with $CAPGATE_ADMIN_TOKEN read "malformed token: 3 dot-separated
// segments … expected, got 1". Asked only once the bearer failed as a
// client credential (err, counted and budgeted as any failed token; a
// throttled one is not looked at), through the digests the admin and
// sync auth compare in constant time; the token is never logged.
func (c *Coordinator) operatorToken(token []byte, err error) string {
	var spent *failguard.Spent
	switch {
	case errors.As(err, &spent):
		return ""
	case c.adminTokens.matches(token):
		return "the admin token"
	case c.syncTokens.matches(token):
		return "a sync token"
	}
	return ""
}

// allowedScopeMax bounds the names allowedScope lists.
const allowedScopeMax = 10

// allowedScope says, for a client credential refused a group or topic,
// which ones it does allow and how to get one for more: "client
// credential does not allow group g2" left a new user guessing which
// group the credential they were handed was for (newuser7). The names
// are the credential's own claims, readable in the token by whoever holds
// it; an identity token's come from the coordinator's rules, which are
// not told.
func allowedScope(credential *ocap.Claims, what string, names []string) string {
	if credential.Kind() != ocap.KindClient || len(names) == 0 {
		return ""
	}
	shown := names[:min(len(names), allowedScopeMax)]
	more := ""
	if len(names) > len(shown) {
		more = fmt.Sprintf(" and %d more", len(names)-len(shown))
	}
	return fmt.Sprintf(": it allows %s %s%s (capgate admin client-credential --%s mints one for others)", what, strings.Join(shown, ", "), more, what)
}

// checkJoinScope checks the request against what the credential allows.
func checkJoinScope(ctx *fasthttp.RequestCtx, credential *ocap.Claims, groupName string, req api.JoinRequest) bool {
	what := credentialName(credential)
	if !credential.AllowsGroup(groupName) {
		writeError(ctx, api.CodeForbidden, what+" does not allow group "+groupName+allowedScope(credential, "groups", credential.Groups))
		return false
	}
	for _, topic := range req.Topics {
		if !credential.AllowsTopic(topic) {
			writeError(ctx, api.CodeForbidden, what+" does not allow topic "+topic+allowedScope(credential, "topics", credential.Topics))
			return false
		}
	}
	if req.TopicPattern != "" && !credential.AllowsTopic("*") {
		writeError(ctx, api.CodeForbidden, "topic_pattern needs a credential for any topic (*): this "+what+" does not allow every topic")
		return false
	}
	return true
}

// checkJoinSyntax applies the request's syntax rules.
func checkJoinSyntax(ctx *fasthttp.RequestCtx, req api.JoinRequest) bool {
	for _, topic := range req.Topics {
		if !ocap.ValidTopic(topic) {
			writeErrorDetails(ctx, api.CodeBadRequest, fmt.Sprintf("topics: %.80q is not a topic name: a topic is %s", topic, topicRule),
				map[string]any{"field": "topics"})
			return false
		}
	}
	for _, f := range [][2]string{{"member_id", req.MemberID}, {"instance_id", req.InstanceID}, {"client_id", req.ClientID}} {
		if f[1] != "" && !ocap.ValidName(f[1]) {
			writeErrorDetails(ctx, api.CodeBadRequest, fmt.Sprintf("%s %.80q: must be %s", f[0], f[1], ocap.NameRule), map[string]any{"field": f[0]})
			return false
		}
	}
	return true
}

// checkSessionTimeout refuses a session_timeout_ms out of its range
// naming the value given and the range (msRange): the machine's refusal
// spoke of session_timeout in durations only, and a negative one said
// "must be >= 0". 0 or absent is the group's.
func (c *Coordinator) checkSessionTimeout(ctx *fasthttp.RequestCtx, ms int64) bool {
	if problem, details := c.sessionTimeoutRange("the group's").refusal(ms); problem != "" {
		writeErrorDetails(ctx, api.CodeBadRequest, problem, details)
		return false
	}
	return true
}

// sessionTimeoutRange is session_timeout_ms's range; zero as msRange's.
func (c *Coordinator) sessionTimeoutRange(zero string) msRange {
	return msRange{field: "session_timeout_ms", lo: c.cfg.Groups.SessionTimeoutMin, hi: c.cfg.Groups.SessionTimeoutMax,
		settings: "coordinator.groups.session_timeout_min, coordinator.groups.session_timeout_max", zero: zero}
}

// answerJoin mints the member token and the grants of reply and writes
// the answer. When minting fails the answer is 500 internal, logged at
// ERROR with the cause; a member this join created (created) is taken
// out again first (undoJoin), so a join either answers its member or
// leaves none behind. A rejoin's member existed before and stays: its
// client still holds its member token and may rejoin again. joiner
// (joinTenant) owns the new member among the known holders of the
// join's address (vouch). payer's tenant_member_rate is charged a token
// per capability minted ("": paid before, as a renewal is).
func (c *Coordinator) answerJoin(ctx *fasthttp.RequestCtx, reply group.JoinReply, memberTTL time.Duration, created bool, joiner, payer string, patternMatches *int) {
	token, member, err := c.keys.minter.Mint(ocap.KindMember, ocap.Claims{Subject: reply.MemberID, Group: reply.Group},
		c.now(), memberTTL)
	if err != nil {
		c.failJoin(ctx, reply, created, "mint member token", err)
		return
	}
	c.vouch(ctx, member, joiner)
	mint := reply.Grants
	if payer != "" {
		now, _ := c.paceMints(payer, group.News{Group: reply.Group, MemberID: reply.MemberID, Grants: reply.Grants}, time.Time{})
		mint = now.Grants
	}
	grants, err := c.mintGrants(mint, true, time.Unix(int64(member.ExpiresAt), 0))
	if err != nil {
		c.failJoin(ctx, reply, created, "mint grants", err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, api.JoinResponse{
		MemberID: reply.MemberID, MemberToken: token,
		SessionTimeoutMs: reply.SessionTimeout.Milliseconds(), HeartbeatWaitMs: reply.HeartbeatWait.Milliseconds(),
		Grants: grants, TopicPatternMatches: patternMatches,
	})
}

// failJoin answers a join whose answer could not be made: it undoes the
// member the join created, logs the cause at ERROR (the error names
// claims, never a token or key) and answers 500 internal.
func (c *Coordinator) failJoin(ctx *fasthttp.RequestCtx, reply group.JoinReply, created bool, what string, cause error) {
	fields := []zap.Field{zap.String("group", reply.Group), zap.String("member_id", reply.MemberID), zap.Error(cause)}
	if created {
		err := c.undoJoin(reply)
		if err != nil {
			fields = append(fields, zap.NamedError("undo_error", err))
		}
		fields = append(fields, zap.Bool("member_removed", err == nil))
	}
	c.log.Error("join: "+what+" failed; answered 500", fields...)
	writeError(ctx, api.CodeInternal, what)
}

// undoJoin takes out a member whose join could not be answered
// (group.UndoJoin): its partitions move at once (fenced first: the
// machine counts the grants it handed the shell as sent). Before, such a
// member stayed until its session timed out, holding every partition it
// had been given — a client_id of 239-255 characters made one on every
// join.
func (c *Coordinator) undoJoin(reply group.JoinReply) error {
	msg, err := c.call(func(ref group.Ref) group.Event {
		return group.UndoJoin{Ref: ref, Group: reply.Group, MemberID: reply.MemberID}
	})
	switch r := msg.(type) {
	case group.Done:
		return nil
	case group.Rejected:
		if r.Code == api.CodeUnknownMember {
			return nil // gone already (an admin revoke, a static replacement)
		}
		return fmt.Errorf("undo join: %s: %s", r.Code, r.Message)
	}
	if err == nil {
		err = fmt.Errorf("undo join: unexpected answer %T", msg)
	}
	return err
}

// keyedRepeat is the member a keyed join would repeat
// (group.KeyedMemberID), "" for a join without a key or naming its
// member.
func keyedRepeat(groupName string, credential *ocap.Claims, req api.JoinRequest, joinKey string) string {
	if joinKey == "" || req.MemberID != "" {
		return ""
	}
	return group.KeyedMemberID(groupName, tenant(credential), req.ClientID, joinKey)
}
