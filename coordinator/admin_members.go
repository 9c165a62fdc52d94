package coordinator

// Behavior: POST /v1/admin/groups/{g}/members/{id}/revoke — bearer: an
// admin token. Fences every partition the member holds, denies all its
// capabilities on the gateways until they expire (revoked_members on the
// sync channel), and removes it; its member token then gets 409
// unknown_member (heartbeat, commit, leave, and a rejoin with it). The
// body (RevokeRequest, may be empty) gives the reason the audit log
// keeps. Answers MemberRevokeResponse; a member revoked already whose
// revocation still runs (at least capability_lease) is answered 200 with
// already_revoked, nothing done — an operator repeating a revoke whose
// answer was lost (a timeout, a 503 with details.applied unknown, a
// leader killed before it answered) learns it holds. 404 not_found for
// an unknown group (as every admin route naming a group), 409
// unknown_member for any other member the group does not hold alive.

import (
	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/group"
)

func (c *Coordinator) handleAdminMemberRevoke(ctx *fasthttp.RequestCtx, params []string) {
	groupName, member := params[0], params[1]
	if !groupParam(ctx, groupName) {
		return
	}
	if !validMemberID(member) {
		writeError(ctx, api.CodeBadRequest, "invalid member id: 1-272 printable characters without '/', not . or ..")
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
	writeJSON(ctx, fasthttp.StatusOK, MemberRevokeResponse{Group: groupName, MemberID: member, Until: timeText(reply.Until), Fenced: reply.Fenced, AlreadyRevoked: reply.AlreadyRevoked})
}

// memberIDMax is the longest member id an admin can name: every id a
// member can have — group.MemberIDMax today, and the ids coordinators
// made before member ids were cut (a 239-255-character client_id, "-",
// 16 hex digits: up to 272), which a store may still hold. The route must
// take every id the machine holds, or a member could not be removed.
const memberIDMax = 255 + 1 + 16

// validMemberID is ocap.ValidName's rule with memberIDMax as the bound:
// printable ASCII without '/', neither "." nor "..".
func validMemberID(id string) bool {
	if len(id) == 0 || len(id) > memberIDMax || id == "." || id == ".." {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c > '~' || c == '/' {
			return false
		}
	}
	return true
}
