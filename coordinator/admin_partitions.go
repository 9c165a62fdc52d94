package coordinator

// Behavior: admin, one partition of a group — bearer: an admin token.
// 404 when the topic has no such partition (as last read from Kafka).
//   POST .../groups/{g}/partitions/{t}/{p}/revoke with RevokeRequest: fence
//     the partition under a new epoch and reassign it (possibly to the same
//     member); an outside lease on it ends. Answers RevokeResponse only
//     once every gateway is safe for the fence (acked, silent, or the old
//     token expired), so "200" means nobody can read it under the old
//     epoch any more.
//   POST .../lease with LeaseRequest: pin the partition to holder for
//     ttl_ms through the normal handoff. A holder that is not a member is
//     an outside holder: the partition leaves the assignment and the
//     capability (fetch+commit, ep, exp capped by max_lease) comes in the
//     LeaseResponse. Answers once the holder is granted.
//   PUT .../offset with OffsetResetRequest: set the committed offset, even
//     backwards (the only way it moves back); a held partition is fenced
//     and regranted from the new offset. Answers 200 {}.

import (
	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/group"
	"github.com/capgate/capgate/ocap"
)

// partitionPath is the validated {g}/{t}/{p} of a partition route.
type partitionPath struct {
	group, topic string
	partition    int32
}

func parsePartitionPath(ctx *fasthttp.RequestCtx, params []string) (partitionPath, bool) {
	if !groupParam(ctx, params[0]) {
		return partitionPath{}, false
	}
	p, ok := partitionParams(ctx, params[1], params[2])
	return partitionPath{params[0], params[1], p}, ok
}

func (c *Coordinator) handleAdminPartitionRevoke(ctx *fasthttp.RequestCtx, params []string) {
	path, ok := parsePartitionPath(ctx, params)
	if !ok {
		return
	}
	var req RevokeRequest
	if !decodeBody(ctx, &req, true) {
		return
	}
	msg, err := c.call(func(ref group.Ref) group.Event {
		return group.RevokePartition{Ref: ref, Group: path.group, Topic: path.topic, Partition: path.partition, Reason: req.Reason}
	})
	reply, ok := msg.(group.RevokeReply)
	if !ok {
		writeMachineError(ctx, msg, err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, RevokeResponse{Group: reply.Group, Topic: reply.Topic, Partition: reply.Partition, Epoch: reply.Epoch})
}

func (c *Coordinator) handleAdminPartitionLease(ctx *fasthttp.RequestCtx, params []string) {
	path, ok := parsePartitionPath(ctx, params)
	if !ok {
		return
	}
	var req LeaseRequest
	if !decodeBody(ctx, &req, false) {
		return
	}
	if !ocap.ValidName(req.Holder) || req.TTLMs <= 0 {
		writeError(ctx, api.CodeBadRequest, "holder (1-255 printable characters without '/') and ttl_ms > 0 required")
		return
	}
	msg, err := c.call(func(ref group.Ref) group.Event {
		return group.Lease{Ref: ref, Group: path.group, Topic: path.topic, Partition: path.partition, Holder: req.Holder, TTL: msDuration(req.TTLMs)}
	})
	reply, ok := msg.(group.LeaseReply)
	if !ok {
		writeMachineError(ctx, msg, err)
		return
	}
	g := reply.Grant
	out := LeaseResponse{
		Group: path.group, Topic: g.Topic, Partition: g.Partition, Holder: g.Holder, Outside: g.Outside,
		Epoch: g.Epoch, Offset: g.Offset, Until: timeText(reply.Until),
	}
	if g.Outside {
		r, err := c.renderGrants([]group.Grant{g}, true)
		if err != nil || len(r.Grants) != 1 {
			writeError(ctx, api.CodeInternal, "mint lease capability")
			return
		}
		grant := r.Grants[0]
		out.Offset, out.Capability, out.JTI, out.ExpiresAt = grant.Offset, grant.Capability, r.JTIs[0], grant.ExpiresAt
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
}

func (c *Coordinator) handleAdminPartitionOffset(ctx *fasthttp.RequestCtx, params []string) {
	path, ok := parsePartitionPath(ctx, params)
	if !ok {
		return
	}
	var req OffsetResetRequest
	if !decodeBody(ctx, &req, false) {
		return
	}
	msg, err := c.call(func(ref group.Ref) group.Event {
		return group.ResetOffset{Ref: ref, Group: path.group, Topic: path.topic, Partition: path.partition, Offset: req.Offset, Metadata: req.Metadata}
	})
	if _, ok := msg.(group.Done); !ok {
		writeMachineError(ctx, msg, err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, struct{}{})
}
