package coordinator

// Behavior: POST /v1/admin/clients — bearer: an admin token. Body
// ClientRequest: mint a client credential (ocap.KindClient, sub = name)
// that may join the listed groups and subscribe to the listed topics,
// valid for ttl_ms (default member_token_ttl, at least 1000 and at most
// client_credential_ttl_max: else 400 naming the ttl asked, the bound
// and, above it, its setting, details limit and max in ms). Entries
// are patterns: an exact name, "*"
// (any), or a prefix ending in "*" ("orders-*", as Kafka's prefixed
// ACLs); a "*" anywhere else is refused with 400; a repeated entry is
// minted once (as OAuth clients are registered). topics empty or absent
// means any topic (["*"]); a topic_pattern join needs "*". ops is what
// it allows: consume (join the groups, read through them) and produce
// (write through the Kafka listener to the topics named exactly);
// absent or empty is consume alone, least privilege. consume is
// required; another name, or produce without an exactly named topic, is
// 400. Answers ClientResponse (key client_credential, as
// credentials.json and `consume --credential-file` read it, and the
// ops). Client credentials are bearer secrets: revoke one by jti.

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/ocap"
)

func (c *Coordinator) handleAdminClients(ctx *fasthttp.RequestCtx, _ []string) {
	var req ClientRequest
	if !decodeBody(ctx, &req, false) {
		return
	}
	setAuditTarget(ctx, "client:"+cut(req.Name, 64))
	if len(req.Topics) == 0 {
		req.Topics = []string{"*"}
	}
	// A repeated pattern allows nothing more: minted once, as the OAuth
	// client registration stores it (["a","a"] was minted and echoed).
	req.Groups, req.Topics = distinct(req.Groups), distinct(req.Topics)
	ops, msg := checkClient(req)
	if msg != "" {
		writeError(ctx, api.CodeBadRequest, msg)
		return
	}
	if !c.grantableTopics(ctx, req.Topics) {
		return
	}
	ttl, ms := msDuration(req.TTLMs), req.TTLMs
	switch {
	case ms < 0:
		writeErrorDetails(ctx, api.CodeBadRequest, fmt.Sprintf("ttl_ms must be >= 0 (0: coordinator.member_token_ttl, %s), got %d", c.cfg.MemberTokenTTL, ms),
			map[string]any{"field": "ttl_ms", "min": 0})
		return
	case ms == 0:
		ttl, ms = c.cfg.MemberTokenTTL, c.cfg.MemberTokenTTL.Milliseconds()
	}
	if problem, details := c.clientTTLBound().refusal(ms); problem != "" {
		writeErrorDetails(ctx, api.CodeBadRequest, problem, details)
		return
	}
	token, claims, err := c.keys.minter.Mint(ocap.KindClient, ocap.Claims{Subject: req.Name, Groups: req.Groups, Topics: req.Topics, Ops: ops}, c.now(), ttl)
	if err != nil {
		writeError(ctx, api.CodeBadRequest, "mint: "+err.Error())
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, ClientResponse{Credential: token, JTI: claims.ID, Ops: claims.ClientOps().Names(),
		ExpiresAt: rfc3339(int64(claims.ExpiresAt))})
}

// checkClient says what is wrong with a client request ("" when nothing
// is) and returns the ops it asks for.
func checkClient(req ClientRequest) (ocap.Ops, string) {
	switch {
	case !ocap.ValidName(req.Name):
		return 0, "name: 1-255 printable characters without '/', not . or .. required"
	case strings.HasPrefix(req.Name, oauthSubject):
		return 0, "name: the prefix " + oauthSubject + " is reserved for credentials of the token endpoint"
	case len(req.Groups) == 0 || len(req.Topics) == 0:
		return 0, "groups and topics required (\"*\" = any)"
	}
	if msg := checkPatterns("groups", req.Groups, ocap.ValidName); msg != "" {
		return 0, msg
	}
	if msg := checkPatterns("topics", req.Topics, ocap.ValidTopic); msg != "" {
		return 0, msg
	}
	return checkClientOps(req.Ops, req.Topics)
}

// maxClientOps bounds the ops list read (there are two ops; repeats are
// allowed, not without end).
const maxClientOps = 8

// checkClientOps parses a client credential's ops: consume (required)
// and produce, which needs a topic named exactly (a pattern grants
// consume only: ocap.Claims.MayProduceTo).
func checkClientOps(names, topics []string) (ocap.Ops, string) {
	if len(names) > maxClientOps {
		return 0, fmt.Sprintf("ops: at most %d entries (consume, produce)", maxClientOps)
	}
	ops, err := ocap.ParseClientOps(names)
	switch {
	case err != nil:
		return 0, "ops: " + strings.TrimPrefix(err.Error(), "ocap: ")
	case !ops.Has(ocap.OpConsume):
		return 0, "ops: consume is required (every client credential joins groups); add produce to also write"
	case ops.Has(ocap.OpProduce) && !slices.ContainsFunc(topics, ocap.IsExactName):
		return 0, "ops: produce needs a topic named exactly in topics (\"*\" and prefix patterns grant consume only)"
	}
	return ops, ""
}

// checkPatterns says which entry of list is not a pattern, or "".
func checkPatterns(what string, list []string, valid func(string) bool) string {
	for _, e := range list {
		if ocap.ValidPattern(e, valid) {
			continue
		}
		if prefix, _ := strings.CutSuffix(e, "*"); strings.Contains(prefix, "*") {
			return fmt.Sprintf("%s: %.80q: \"*\" is allowed only at the end, as a prefix (\"orders-*\"), or alone (any)", what, e)
		}
		return fmt.Sprintf("%s: %.80q is not a valid name", what, e)
	}
	return ""
}

// clientTTLBound is the ttl a client credential may have.
func (c *Coordinator) clientTTLBound() ttlBound {
	return ttlBound{min: time.Second, max: c.cfg.ClientCredentialTTLMax, key: "coordinator.client_credential_ttl_max", lasts: "a credential"}
}

// MintClientCredential mints a consume-only client credential without
// going through HTTP (for `capgate dev`, which prints one): name is its
// sub, groups and topics what it may join ("*" = any), ttl at most
// client_credential_ttl_max.
func (c *Coordinator) MintClientCredential(name string, groups, topics []string, ttl time.Duration) (string, error) {
	if _, msg := checkClient(ClientRequest{Name: name, Groups: groups, Topics: topics}); msg != "" {
		return "", fmt.Errorf("coordinator: client credential: %s", msg)
	}
	if ttl < time.Second || ttl > c.cfg.ClientCredentialTTLMax {
		return "", fmt.Errorf("coordinator: client credential: ttl must be within [1s, %s] (coordinator.client_credential_ttl_max), got %s", c.cfg.ClientCredentialTTLMax, ttl)
	}
	token, _, err := c.keys.minter.Mint(ocap.KindClient, ocap.Claims{Subject: name, Groups: groups, Topics: topics}, c.now(), ttl)
	if err != nil {
		return "", fmt.Errorf("coordinator: client credential: %w", err)
	}
	return token, nil
}
