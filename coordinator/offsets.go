package coordinator

// Behavior: GET /v1/groups/{group}/offsets — bearer: an admin token, or a
// member token of the group whose member is alive (403 for another group,
// 409 unknown_member otherwise). Answers api.OffsetsResponse: the
// committed offsets of the group, sorted by topic and partition — every
// one for the admin, those of the topics it subscribes to for a member
// (another member's topic, which its credential may not cover, is not
// its to read: redteam11 #1); an unknown group has none. A member's read
// spends its tenant's tenant_member_rate as a tenant group read does
// (tenantRead's price: a token, one more per readItemsPerToken
// partitions walked and per readBytesPerToken answered) — at one token
// a read, a tenant's members could ask a group of 10,000 partitions
// with 4 KiB of metadata each (40 MB an answer) 5,000 times a second
// (redteam14 #4).

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
	known, cost := true, 0
	read := func(m *group.Machine) {
		if member != "" {
			offsets, known = m.MemberOffsets(groupName, member)
			cost = m.ReadCost(groupName, false)
			return
		}
		offsets = m.Offsets(groupName)
	}
	var err error
	tenant := ""
	if member == "" {
		err = c.query(read)
	} else {
		var shared bool // a member's read counts in its tenant's loop share
		tenant = c.share.memberTenant(groupName, member)
		if shared, err = c.queryShared(ctx, tenant, read); !shared {
			return
		}
		c.share.charge(tenant, cost/readItemsPerToken)
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
		if tenant != "" {
			c.share.charge(tenant, len(ctx.Response.Body())/readBytesPerToken)
		}
	}
}
