package coordinator

// Behavior: admin, OAuth2 clients — bearer: an admin token (tls.admin).
//   POST /v1/admin/oauth/clients with OAuthClientRequest: register a client
//     of the token endpoint (POST /oauth/token) that may obtain client
//     credentials for groups and topics (exact names, "*", or "prefix*")
//     allowing ops (consume, produce; absent: consume only — checked as
//     POST /v1/admin/clients checks them). A client registered before
//     ops existed obtains consume-only credentials. A repeated group or
//     topic is registered once. token_ttl_ms (default oauth.token_ttl)
//     out of [1000, client_credential_ttl_max] is 400 naming the value,
//     the bound and its setting (details limit and max, as POST
//     /v1/admin/clients). The widest credential the client could obtain
//     (no scope: all its groups and topics) is minted and thrown away
//     first: one over the token size cap (4096 bytes) is 400 naming its
//     size, the cap and the lists to shorten, so no registered client
//     has every token request refused.
//     Answers OAuthClientCreated with client_id and client_secret: the
//     secret is shown once; only its SHA-256 is stored (it is 256 random
//     bits, so a fast hash suffices: there is nothing to brute-force
//     offline). 409 conflict beyond oauth.clients_max.
//   GET /v1/admin/oauth/clients: every client (no secrets), sorted by id.
//   POST /v1/admin/oauth/clients/{id}/revoke: the client gets no more
//     tokens (401 invalid_client, as an unknown one), and every credential
//     it obtained that is still alive is denied (409 capability_revoked at
//     join; the members they opened are revoked). All or nothing: when
//     the new denied ids do not all fit under groups.limits.denied, 409
//     limit_exceeded naming it, and nothing changed — no credential
//     denied, the client not revoked. The ids are denied first (one
//     machine event, one store write), the client is stored revoked
//     after: a failure between leaves every credential denied and the
//     client answered 503, and a second revoke completes it. 404 for an
//     unknown id.
// Clients live in the store's meta values (oauth.client/<id>) and are
// written through before an answer names them.

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/group"
	"github.com/capgate/capgate/internal/failguard"
	"github.com/capgate/capgate/ocap"
	"github.com/capgate/capgate/store"
)

const (
	metaOAuthClient = "oauth.client/"
	// oauthSubject prefixes the sub of every credential the token
	// endpoint mints; admin-minted credentials may not use it.
	oauthSubject = "oauth:"
)

// oauthClient is one registered client as stored (JSON in meta).
type oauthClient struct {
	ID         string        `json:"id"`
	Name       string        `json:"name"`
	SecretHash string        `json:"secret_sha256"`
	Groups     []string      `json:"groups"`
	Topics     []string      `json:"topics"`
	Ops        ocap.Ops      `json:"ops,omitempty"` // absent (registered before ops): consume
	TokenTTLMs int64         `json:"token_ttl_ms"`
	Created    int64         `json:"created"`
	RevokedAt  int64         `json:"revoked_at,omitempty"`
	Issued     []issuedToken `json:"issued,omitempty"` // credentials still alive: denied on revoke
}

type issuedToken struct {
	JTI string `json:"jti"`
	Exp int64  `json:"exp"`
}

// live drops the issued tokens expired at now.
func (o *oauthClient) live(now time.Time) []issuedToken {
	return slices.DeleteFunc(o.Issued, func(t issuedToken) bool { return t.Exp <= now.Unix() })
}

// liveCount is len(o.live(now)) without compacting o.Issued in place: a
// listing holds only the registry lock, and a revoke copies the list
// holding the client's issuing lock (review22).
func (o *oauthClient) liveCount(now time.Time) int {
	n := 0
	for _, t := range o.Issued {
		if t.Exp > now.Unix() {
			n++
		}
	}
	return n
}

// oauthRegistry holds the clients and the failure budget of the token
// endpoint. mu guards the map and every client's fields, and is never
// held across a store write or a machine call: every OAuth credential's
// verification takes it (revokedOAuthSubject), and a token request held
// it across the write that records its credential, so one client asking
// for its live_tokens_max credentials at once (1,000 writes of a record
// growing to 1,000 entries) held up every other OAuth tenant's joins and
// reads behind each write — 3.5 s of ~50 ms waits, 292 ms at worst, on
// badger (redteam16). What must not interleave for one client — a token
// request's live count, mint and record; a revoke's deny and record, so
// no credential is minted that the deny missed — holds that client's
// issuing lock instead (issueLock). It is also the endpoint's metrics
// collector (oauth_metrics.go).
type oauthRegistry struct {
	mu       sync.Mutex
	clients  map[string]*oauthClient
	issuing  map[string]*sync.Mutex // per client id (issueLock); at most clients_max
	failures *failguard.Guard       // failed authentications per address (oauth_limit.go)
	oauthMetrics
}

// issueLock is client id's issuing lock, made on first use (mu held).
func (r *oauthRegistry) issueLock(id string) *sync.Mutex {
	l := r.issuing[id]
	if l == nil {
		l = &sync.Mutex{}
		r.issuing[id] = l
	}
	return l
}

func loadOAuthClients(meta map[string][]byte, cfg OAuthConfig) (*oauthRegistry, error) {
	r := &oauthRegistry{clients: map[string]*oauthClient{}, issuing: map[string]*sync.Mutex{},
		failures: newOAuthFailureGuard(cfg)}
	r.oauthMetrics.init(r)
	for name, value := range meta {
		if !strings.HasPrefix(name, metaOAuthClient) {
			continue
		}
		var o oauthClient
		if err := json.Unmarshal(value, &o); err != nil || o.ID != strings.TrimPrefix(name, metaOAuthClient) {
			return nil, fmt.Errorf("coordinator: meta %q: malformed oauth client", name)
		}
		r.clients[o.ID] = &o
	}
	return r, nil
}

// save writes o through to the store.
func (c *Coordinator) saveOAuthClient(o *oauthClient) error {
	b, err := json.Marshal(o)
	if err != nil {
		return err
	}
	return c.store.Update(func(w *store.Writer) error { return w.PutMeta(metaOAuthClient+o.ID, b) })
}

// revokedOAuthSubject reports whether sub is that of a credential the
// token endpoint minted for a client that is now revoked or gone.
func (c *Coordinator) revokedOAuthSubject(sub string) bool {
	id, ok := strings.CutPrefix(sub, oauthSubject)
	if !ok {
		return false
	}
	c.oauth.mu.Lock()
	defer c.oauth.mu.Unlock()
	o := c.oauth.clients[id]
	return o == nil || o.RevokedAt != 0
}

// OAuthClientRequest is POST /v1/admin/oauth/clients. TokenTTLMs is the
// lifetime of the credentials it obtains (default oauth.token_ttl, at most
// client_credential_ttl_max); Ops what they allow (consume, produce;
// absent: consume only).
type OAuthClientRequest struct {
	Name       string   `json:"name"`
	Groups     []string `json:"groups"`
	Topics     []string `json:"topics"`
	Ops        []string `json:"ops,omitempty"`
	TokenTTLMs int64    `json:"token_ttl_ms,omitempty"`
}

// OAuthClientView is a client as the admin API shows it (no secret).
type OAuthClientView struct {
	ClientID   string   `json:"client_id"`
	Name       string   `json:"name"`
	Groups     []string `json:"groups"`
	Topics     []string `json:"topics"`
	Ops        []string `json:"ops"`
	TokenTTLMs int64    `json:"token_ttl_ms"`
	Created    string   `json:"created"`
	RevokedAt  string   `json:"revoked_at,omitempty"`
	LiveTokens int      `json:"live_tokens"`
}

// OAuthClientCreated answers a registration: the only time the secret is
// shown.
type OAuthClientCreated struct {
	OAuthClientView
	ClientSecret string `json:"client_secret"`
}

// OAuthClientsResponse is GET /v1/admin/oauth/clients.
type OAuthClientsResponse struct {
	Clients []OAuthClientView `json:"clients"`
}

// OAuthClientRevoked answers a revoke: how many live credentials were
// denied.
type OAuthClientRevoked struct {
	ClientID  string `json:"client_id"`
	RevokedAt string `json:"revoked_at"`
	Denied    int    `json:"denied"`
}

func (o *oauthClient) view(now time.Time) OAuthClientView {
	ops := (&ocap.Claims{Ops: o.Ops}).ClientOps()
	v := OAuthClientView{ClientID: o.ID, Name: o.Name, Groups: o.Groups, Topics: o.Topics, Ops: ops.Names(), TokenTTLMs: o.TokenTTLMs,
		Created: rfc3339(o.Created), LiveTokens: o.liveCount(now)}
	if o.RevokedAt != 0 {
		v.RevokedAt = rfc3339(o.RevokedAt)
	}
	return v
}

func (c *Coordinator) handleAdminOAuthClientCreate(ctx *fasthttp.RequestCtx, _ []string) {
	var req OAuthClientRequest
	if !decodeBody(ctx, &req, false) {
		return
	}
	req.Groups, req.Topics = distinct(req.Groups), distinct(req.Topics)
	// token_ttl_ms is checked below, in its own words.
	ops, msg := checkClient(ClientRequest{Name: req.Name, Groups: req.Groups, Topics: req.Topics, Ops: req.Ops})
	if msg != "" {
		writeError(ctx, api.CodeBadRequest, msg)
		return
	}
	if !c.grantableTopics(ctx, req.Topics) {
		return
	}
	ms := req.TokenTTLMs
	switch {
	case ms < 0:
		writeErrorDetails(ctx, api.CodeBadRequest, fmt.Sprintf("token_ttl_ms must be >= 0 (0: coordinator.oauth.token_ttl, %s), got %d", c.cfg.OAuth.TokenTTL, ms),
			map[string]any{"field": "token_ttl_ms", "min": 0})
		return
	case ms == 0:
		ms = min(c.cfg.OAuth.TokenTTL, c.cfg.ClientCredentialTTLMax).Milliseconds()
	}
	bound := c.clientTTLBound()
	bound.field = "token_ttl_ms"
	if problem, details := bound.refusal(ms); problem != "" {
		writeErrorDetails(ctx, api.CodeBadRequest, problem, details)
		return
	}
	id, secret, err := newClientSecretPair()
	if err != nil {
		writeError(ctx, api.CodeInternal, "generate client secret")
		return
	}
	now := c.now()
	o := &oauthClient{ID: id, Name: req.Name, SecretHash: HashSecret(secret), Groups: req.Groups, Topics: req.Topics, Ops: ops,
		TokenTTLMs: ms, Created: now.Unix()}
	if msg := c.trialMint(o, now); msg != "" {
		writeError(ctx, api.CodeBadRequest, msg)
		return
	}
	c.oauth.mu.Lock()
	defer c.oauth.mu.Unlock()
	if len(c.oauth.clients) >= c.cfg.OAuth.ClientsMax {
		writeError(ctx, api.CodeConflict, fmt.Sprintf("at most %d oauth clients (oauth.clients_max)", c.cfg.OAuth.ClientsMax))
		return
	}
	if err := c.saveOAuthClient(o); err != nil {
		writeError(ctx, api.CodeUnavailable, "store the client: "+err.Error())
		return
	}
	c.oauth.clients[id] = o
	writeJSON(ctx, fasthttp.StatusOK, OAuthClientCreated{OAuthClientView: o.view(now), ClientSecret: secret})
}

// distinct is list without its repeated entries, in the order given
// (["g","g"] registers ["g"]): a repeat allows nothing more, and a
// credential carries every entry of its client's lists.
func distinct(list []string) []string {
	seen := make(map[string]bool, len(list))
	return slices.DeleteFunc(slices.Clone(list), func(e string) bool {
		dup := seen[e]
		seen[e] = true
		return dup
	})
}

// credentialClaims are the claims of a credential o obtains for groups
// and topics (its own lists, or a scope's narrowing of them).
func (o *oauthClient) credentialClaims(groups, topics []string) ocap.Claims {
	return ocap.Claims{Subject: oauthSubject + o.ID, Groups: groups, Topics: topics, Ops: o.Ops}
}

// trialMint mints, and throws away, the widest credential o could obtain
// (a token request without a scope: all of its groups and topics, its
// ops, its sub and lifetime), so that a client every token request of
// which would be refused is never registered. It says why o cannot be
// registered, "" when it can.
func (c *Coordinator) trialMint(o *oauthClient, now time.Time) string {
	_, _, err := c.keys.minter.Mint(ocap.KindClient, o.credentialClaims(o.Groups, o.Topics), now, msDuration(o.TokenTTLMs))
	switch {
	case errors.Is(err, ocap.ErrTooLarge):
		return fmt.Sprintf("the credentials of this client would be %s (the token size cap, ocap.MaxTokenBytes): "+
			"its groups (%d patterns, %d bytes) and topics (%d, %d bytes) are too long — use fewer or shorter patterns "+
			"(a prefix pattern such as \"orders-*\" covers many names), or register several clients",
			tooLargeText(err), len(o.Groups), listBytes(o.Groups), len(o.Topics), listBytes(o.Topics))
	case err != nil:
		return "mint: " + err.Error()
	}
	return ""
}

// tooLargeText is the sizes an ocap.ErrTooLarge names ("8896 bytes >
// 4096"), worded for a reader.
func tooLargeText(err error) string {
	sizes := strings.TrimPrefix(err.Error(), ocap.ErrTooLarge.Error()+": ")
	return strings.Replace(sizes, " > ", ", above ", 1)
}

// listBytes is the length of list's entries together.
func listBytes(list []string) int {
	n := 0
	for _, e := range list {
		n += len(e)
	}
	return n
}

// newClientSecretPair makes a client id (96 random bits) and a secret
// (256 random bits), base64url.
func newClientSecretPair() (id, secret string, err error) {
	var b [12 + 32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", err
	}
	return clientIDPrefix + base64.RawURLEncoding.EncodeToString(b[:12]), base64.RawURLEncoding.EncodeToString(b[12:]), nil
}

func (c *Coordinator) handleAdminOAuthClients(ctx *fasthttp.RequestCtx, _ []string) {
	now := c.now()
	c.oauth.mu.Lock()
	out := OAuthClientsResponse{Clients: []OAuthClientView{}}
	for _, o := range c.oauth.clients {
		out.Clients = append(out.Clients, o.view(now))
	}
	c.oauth.mu.Unlock()
	slices.SortFunc(out.Clients, func(a, b OAuthClientView) int { return strings.Compare(a.ClientID, b.ClientID) })
	writeJSON(ctx, fasthttp.StatusOK, out)
}

// handleAdminOAuthClientRevoke denies every live credential of the
// client in one machine event (all or none: limits.denied may refuse
// it whole), then stores the client revoked. The client's issuing lock
// is held throughout, so it obtains no credential the deny missed.
func (c *Coordinator) handleAdminOAuthClientRevoke(ctx *fasthttp.RequestCtx, params []string) {
	id := params[0]
	now := c.now()
	c.oauth.mu.Lock()
	o := c.oauth.clients[id]
	if o == nil {
		c.oauth.mu.Unlock()
		writeError(ctx, api.CodeNotFound, "unknown oauth client")
		return
	}
	issuing := c.oauth.issueLock(id)
	c.oauth.mu.Unlock()
	issuing.Lock()
	defer issuing.Unlock()
	c.oauth.mu.Lock()
	revoked := *o
	revoked.Issued = slices.Clone(o.Issued) // live compacts in place: o stays as it is on a refusal; copied under mu, as o's fields are read
	c.oauth.mu.Unlock()
	if revoked.RevokedAt == 0 {
		revoked.RevokedAt = now.Unix()
	}
	revoked.Issued = revoked.live(now)
	denials := make([]group.Denial, len(revoked.Issued))
	for i, t := range revoked.Issued {
		denials[i] = group.Denial{JTI: t.JTI, Expires: time.Unix(t.Exp, 0)}
	}
	// Denying also revokes every member those credentials opened; it
	// weighs a whole batch, so it is persisted without other events.
	msg, err := c.callWeighted(c.cfg.Groups.Limits.TopicsPerMember, func(ref group.Ref) group.Event {
		return group.DenyJTIs{Ref: ref, Denials: denials}
	})
	if _, ok := msg.(group.Done); !ok {
		writeMachineError(ctx, msg, err)
		return
	}
	if err := c.saveOAuthClient(&revoked); err != nil {
		// The deny landed: say so, and that the revoke is not whole —
		// the client may still obtain credentials until it is stored
		// revoked. A repeat denies again (idempotent) and stores it.
		writeErrorDetails(ctx, api.CodeUnavailable, fmt.Sprintf("the client's %d live credentials were denied and the members they opened revoked, "+
			"but storing the client revoked failed (%v): it may still obtain credentials — repeat the revoke to finish it", len(denials), err),
			map[string]any{"applied": "partly"})
		return
	}
	c.oauth.mu.Lock()
	*o = revoked
	c.oauth.mu.Unlock()
	writeJSON(ctx, fasthttp.StatusOK, OAuthClientRevoked{ClientID: id, RevokedAt: rfc3339(revoked.RevokedAt), Denied: len(revoked.Issued)})
}

// oauthScope narrows what a token request may join: scope is empty (the
// client's own groups and topics) or space-separated group:<pattern> and
// topic:<pattern> items, each covered by the client's lists. ok is false
// for an item that is malformed, not covered, or widening produce.
func oauthScope(o *oauthClient, scope string) (groups, topics []string, ok bool) {
	for _, item := range strings.Fields(scope) {
		kind, pattern, found := strings.Cut(item, ":")
		switch {
		case !found || pattern == "":
			return nil, nil, false
		case kind == "group" && ocap.PatternsCover(o.Groups, pattern):
			groups = append(groups, pattern)
		case kind == "topic" && ocap.PatternsCover(o.Topics, pattern) && !widensProduce(o, pattern):
			topics = append(topics, pattern)
		default:
			return nil, nil, false
		}
	}
	if groups == nil {
		groups = o.Groups
	}
	if topics == nil {
		topics = o.Topics
	}
	return groups, topics, true
}

// widensProduce reports whether the scope item topic:pattern would give
// a client with produce a write right its registration does not: an
// exact topic only a pattern of the registration covers (a credential
// produces to the topics it names exactly).
func widensProduce(o *oauthClient, pattern string) bool {
	return o.Ops.Has(ocap.OpProduce) && ocap.IsExactName(pattern) && !slices.Contains(o.Topics, pattern)
}
