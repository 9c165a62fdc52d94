package coordinator

// Behavior: POST /v1/admin/clients — bearer: an admin token. Body
// ClientRequest: mint a client credential (ocap.KindClient, sub = name)
// that may join the listed groups and subscribe to the listed topics
// ("*" = any; a topic_pattern join needs "*"), valid for ttl_ms (default
// member_token_ttl, at most client_credential_ttl_max). Answers
// ClientResponse. Client credentials are bearer secrets: revoke one by jti.

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
		return "name: 1-255 printable characters without '/' required"
	case strings.HasPrefix(req.Name, oauthSubject):
		return "name: the prefix " + oauthSubject + " is reserved for credentials of the token endpoint"
	case len(req.Groups) == 0 || len(req.Topics) == 0:
		return "groups and topics required (\"*\" = any)"
	case req.TTLMs < 0:
		return "ttl_ms must be >= 0"
	}
	for _, g := range req.Groups {
		if g != "*" && !ocap.ValidName(g) {
			return "invalid group name in groups"
		}
	}
	for _, t := range req.Topics {
		if t != "*" && !ocap.ValidTopic(t) {
			return "invalid topic name in topics"
		}
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
