package coordinator

// Behavior: POST /v1/admin/clients — bearer: an admin token. Body
// ClientRequest: mint a client credential (ocap.KindClient, sub = name)
// that may join the listed groups and subscribe to the listed topics,
// valid for ttl_ms (default member_token_ttl, at most
// client_credential_ttl_max). Entries are patterns: an exact name, "*"
// (any), or a prefix ending in "*" ("orders-*", as Kafka's prefixed
// ACLs); a "*" anywhere else is refused with 400. topics empty or absent
// means any topic (["*"]); a topic_pattern join needs "*". Answers
// ClientResponse (key client_credential, as credentials.json and
// `consume --credential-file` read it). Client credentials are bearer
// secrets: revoke one by jti.

import (
	"fmt"
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
	if msg := checkClient(req); msg != "" {
		writeError(ctx, api.CodeBadRequest, msg)
		return
	}
	ttl := msDuration(req.TTLMs)
	if ttl == 0 {
		ttl = c.cfg.MemberTokenTTL
	}
	if ttl < time.Second || ttl > c.cfg.ClientCredentialTTLMax {
		writeError(ctx, api.CodeBadRequest, "ttl_ms must be within [1000, client_credential_ttl_max]")
		return
	}
	token, claims, err := c.keys.minter.Mint(ocap.KindClient, ocap.Claims{Subject: req.Name, Groups: req.Groups, Topics: req.Topics}, c.now(), ttl)
	if err != nil {
		writeError(ctx, api.CodeBadRequest, "mint: "+err.Error())
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, ClientResponse{Credential: token, JTI: claims.ID, ExpiresAt: rfc3339(int64(claims.ExpiresAt))})
}

// checkClient says what is wrong with a client request, or "".
func checkClient(req ClientRequest) string {
	switch {
	case !ocap.ValidName(req.Name):
		return "name: 1-255 printable characters without '/', not . or .. required"
	case strings.HasPrefix(req.Name, oauthSubject):
		return "name: the prefix " + oauthSubject + " is reserved for credentials of the token endpoint"
	case len(req.Groups) == 0 || len(req.Topics) == 0:
		return "groups and topics required (\"*\" = any)"
	case req.TTLMs < 0:
		return "ttl_ms must be >= 0"
	}
	if msg := checkPatterns("groups", req.Groups, ocap.ValidName); msg != "" {
		return msg
	}
	return checkPatterns("topics", req.Topics, ocap.ValidTopic)
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

// MintClientCredential mints a client credential without going through
// HTTP (for `capgate dev`, which prints one): name is its sub, groups and
// topics what it may join ("*" = any), ttl at most client_credential_ttl_max.
func (c *Coordinator) MintClientCredential(name string, groups, topics []string, ttl time.Duration) (string, error) {
	if msg := checkClient(ClientRequest{Name: name, Groups: groups, Topics: topics}); msg != "" {
		return "", fmt.Errorf("coordinator: client credential: %s", msg)
	}
	if ttl < time.Second || ttl > c.cfg.ClientCredentialTTLMax {
		return "", fmt.Errorf("coordinator: client credential: ttl must be within [1s, %s], got %s", c.cfg.ClientCredentialTTLMax, ttl)
	}
	token, _, err := c.keys.minter.Mint(ocap.KindClient, ocap.Claims{Subject: name, Groups: groups, Topics: topics}, c.now(), ttl)
	if err != nil {
		return "", fmt.Errorf("coordinator: client credential: %w", err)
	}
	return token, nil
}
