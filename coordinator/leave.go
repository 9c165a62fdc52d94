package coordinator

// Behavior: POST /v1/groups/{group}/leave — bearer: the member token.
// Body api.LeaveRequest (may be empty); its offsets are checked like a
// commit's (commit.go) and committed as a releasing commit, all or
// nothing, then the member is removed and its partitions move without
// waiting for more commits. Answers 200 {} (409 unknown_member if the
// session is already gone).

import (
	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/group"
)

func (c *Coordinator) handleLeave(ctx *fasthttp.RequestCtx, params []string) {
	var req api.LeaveRequest
	groupName, claims, ok := c.memberRequest(ctx, params, &req, true)
	if !ok {
		return
	}
	offsets, ok := c.commitOffsets(ctx, groupName, claims.Subject, req.Offsets, true)
	if !ok {
		return
	}
	msg, shared, err := c.callShared(ctx, c.share.memberTenant(groupName, claims.Subject), func(ref group.Ref) group.Event {
		return group.Leave{Ref: ref, Group: groupName, MemberID: claims.Subject, Offsets: offsets}
	})
	if !shared {
		return
	}
	if _, ok := msg.(group.LeaveReply); !ok {
		writeMachineError(ctx, msg, err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, struct{}{})
}
