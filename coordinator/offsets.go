package coordinator

// Behavior: GET /v1/groups/{group}/offsets — bearer: an admin token, or a
// member token of the group whose member is alive (403 for another group,
// 409 unknown_member otherwise). Answers api.OffsetsResponse: the
// committed offsets of the group, sorted by topic and partition — every
// one for the admin, those of the topics it subscribes to for a member
// (another member's topic, which its credential may not cover, is not
// its to read: redteam11 #1); an unknown group has none.

import (
	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/group"
)

func (c *Coordinator) handleOffsets(ctx *fasthttp.RequestCtx, params []string) {
	groupName := params[0]
	if !groupParam(ctx, groupName) {
		return
	}
	member := ""
	if !c.isAdmin(ctx) {
		claims, ok := c.memberClaims(ctx, groupName)
		if !ok {
			return
		}
		member = claims.Subject
	}
	var offsets []api.CommittedOffset
	known := true
	read := func(m *group.Machine) {
		if member != "" {
			offsets, known = m.MemberOffsets(groupName, member)
			return
		}
		offsets = m.Offsets(groupName)
	}
	var err error
	if member == "" {
		err = c.query(read)
	} else {
		var shared bool // a member's read counts in its tenant's loop share
		if shared, err = c.queryShared(ctx, c.share.memberTenant(groupName, member), read); !shared {
			return
		}
	}
	switch {
	case err != nil:
		writeMachineError(ctx, nil, err)
	case !known:
		writeError(ctx, api.CodeUnknownMember, "unknown member "+member+": rejoin")
	default:
		if offsets == nil {
			offsets = []api.CommittedOffset{}
		}
		writeJSON(ctx, fasthttp.StatusOK, api.OffsetsResponse{Offsets: offsets})
	}
}
