package coordinator

// Behavior: POST /v1/groups/{group}/join — bearer: a client credential
// (ocap.KindClient) whose grps allow the group (else 403) and whose tps
// allow every listed topic (else 403); a topic_pattern needs a credential
// for any topic ("*"). The body is api.JoinRequest; member_id rejoins a
// known member (it gets every partition it holds again, and a fresh member
// token). The answer is api.JoinResponse with a member token (sub = member
// id, grp = group, ttl member_token_ttl) and the grants the member may use
// at once; partitions still held by others arrive later in heartbeats.
// Unlike Kafka there is no join barrier: the answer comes at once.

import (
	"time"

	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/group"
	"github.com/capgate/capgate/ocap"
)

func (c *Coordinator) handleJoin(ctx *fasthttp.RequestCtx, params []string) {
	groupName := params[0]
	if !groupParam(ctx, groupName) {
		return
	}
	credential, ok := c.bearerClaims(ctx, ocap.KindClient, "client credential")
	if !ok {
		return
	}
	var req api.JoinRequest
	if !decodeBody(ctx, &req, false) || !checkJoin(ctx, credential, groupName, req) {
		return
	}
	msg, err := c.call(func(ref group.Ref) group.Event {
		return group.Join{
			Ref: ref, Group: groupName, MemberID: req.MemberID, InstanceID: req.InstanceID, ClientID: req.ClientID,
			Topics: req.Topics, TopicPattern: req.TopicPattern,
			SessionTimeout: time.Duration(req.SessionTimeoutMs) * time.Millisecond, Assignor: req.Assignor,
		}
	})
	reply, ok := msg.(group.JoinReply)
	if !ok {
		writeMachineError(ctx, msg, err)
		return
	}
	c.answerJoin(ctx, reply)
}

// checkJoin applies the credential and the request's syntax rules.
func checkJoin(ctx *fasthttp.RequestCtx, credential *ocap.Claims, groupName string, req api.JoinRequest) bool {
	if !credential.AllowsGroup(groupName) {
		writeError(ctx, api.CodeForbidden, "client credential does not allow group "+groupName)
		return false
	}
	for _, topic := range req.Topics {
		if !ocap.ValidTopic(topic) {
			writeError(ctx, api.CodeBadRequest, "invalid topic name")
			return false
		}
		if !credential.AllowsTopic(topic) {
			writeError(ctx, api.CodeForbidden, "client credential does not allow topic "+topic)
			return false
		}
	}
	if req.TopicPattern != "" && !credential.AllowsTopic("*") {
		writeError(ctx, api.CodeForbidden, "topic_pattern needs a client credential for any topic")
		return false
	}
	for _, name := range []string{req.MemberID, req.InstanceID, req.ClientID} {
		if name != "" && !ocap.ValidName(name) {
			writeError(ctx, api.CodeBadRequest, "member_id, instance_id and client_id must be 1-255 printable characters without '/'")
			return false
		}
	}
	if req.SessionTimeoutMs < 0 {
		writeError(ctx, api.CodeBadRequest, "session_timeout_ms must be >= 0")
		return false
	}
	return true
}

func (c *Coordinator) answerJoin(ctx *fasthttp.RequestCtx, reply group.JoinReply) {
	token, _, err := c.keys.minter.Mint(ocap.KindMember, ocap.Claims{Subject: reply.MemberID, Group: reply.Group},
		c.now(), c.cfg.MemberTokenTTL)
	if err != nil {
		writeError(ctx, api.CodeInternal, "mint member token")
		return
	}
	grants, err := c.mintGrants(reply.Grants, true)
	if err != nil {
		writeError(ctx, api.CodeInternal, "mint grants")
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, api.JoinResponse{
		MemberID: reply.MemberID, MemberToken: token,
		SessionTimeoutMs: reply.SessionTimeout.Milliseconds(), HeartbeatWaitMs: reply.HeartbeatWait.Milliseconds(),
		Grants: grants,
	})
}
