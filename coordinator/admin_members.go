package coordinator

// Behavior: POST /v1/admin/groups/{g}/members/{id}/revoke — bearer: an
// admin token. Fences every partition the member holds, denies all its
// capabilities on the gateways until they expire (revoked_members on the
// sync channel), and removes it; its member token then gets 409
// unknown_member. The body (RevokeRequest, may be empty) gives the
// reason the audit log keeps. Answers MemberRevokeResponse; 409
// unknown_member for a member that is not alive.

import (
	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/group"
	"github.com/capgate/capgate/ocap"
)

func (c *Coordinator) handleAdminMemberRevoke(ctx *fasthttp.RequestCtx, params []string) {
	groupName, member := params[0], params[1]
	if !groupParam(ctx, groupName) {
		return
	}
	if !ocap.ValidName(member) {
		writeError(ctx, api.CodeBadRequest, "invalid member id")
		return
	}
	var req RevokeRequest
	if !decodeBody(ctx, &req, true) {
		return
	}
	msg, err := c.call(func(ref group.Ref) group.Event {
		return group.RevokeMember{Ref: ref, Group: groupName, MemberID: member}
	})
	reply, ok := msg.(group.RevokeMemberReply)
	if !ok {
		writeMachineError(ctx, msg, err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, MemberRevokeResponse{Group: groupName, MemberID: member, Until: timeText(reply.Until), Fenced: reply.Fenced})
}
