package coordinator

// Behavior: admin, one partition of a group — bearer: an admin token.
// 404 when the topic has no such partition (as last read from Kafka).
//   POST .../groups/{g}/partitions/{t}/{p}/revoke with RevokeRequest: fence
//     the partition under a new epoch and reassign it (possibly to the same
//     member); an outside lease on it ends. Answers RevokeResponse only
//     once every gateway is safe for the fence (acked, silent, or the old
//     token expired), so "200" means nobody can read it under the old
//     epoch any more. A reason with a control character is 400 (details
//     field; text.go).
//   POST .../lease with LeaseRequest: pin the partition to holder for
//     ttl_ms (at least 1000, at most groups.limits.lease_ttl_max: else 400
//     naming the ttl asked, the bound and its setting, ttlBound) through
//     the normal handoff. A holder that is not a member is
//     an outside holder: the partition leaves the assignment and the
//     capability (fetch+commit, ep, exp capped by max_lease) comes in the
//     LeaseResponse. Answers once the holder is granted. 403 for a
//     topic no client is granted (Kafka's own, capgate's state logs:
//     grantableTopic).
//   PUT .../offset with OffsetResetRequest: set the committed offset, even
//     backwards (the only way it moves back) — an explicit offset (at most
//     the log end: else 416 offset_out_of_range with latest), or to the
//     earliest / latest offset Kafka has now (503 when Kafka cannot
//     say). A partition someone holds is fenced first and regranted from
//     the new offset: the holder's later commits under the old epoch are
//     refused (409 stale_epoch), so nothing it still had in flight moves
//     the offset again. A partition leased to an outside holder (admin
//     lease to a non-member) is 409 conflict naming the holder and until
//     (details lease): the reset would fence its capability and end the
//     lease, and the holder — no member, no heartbeat — is never granted
//     again; revoke the partition first, or send force:true, which ends
//     the lease and says so (lease_ended). Answers OffsetResetResponse. Metadata holding a
//     control character is 400 (details field; text.go). A body naming
//     neither offset nor to ({}, null) is 400: an empty body must never
//     rewind a group to offset 0.

import (
	"context"
	"fmt"
	"math"
	"time"

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
	// A lease under a second was granted (its partition fenced, epochs
	// raised) and then answered 500: its capability could not be minted
	// (a capability lasts at least a second). Above lease_ttl_max the
	// machine refuses it too; here the refusal names the setting as the
	// other ttl refusals do.
	if !ocap.ValidName(req.Holder) {
		writeErrorDetails(ctx, api.CodeBadRequest, fmt.Sprintf("holder %.80q: a holder is %s", req.Holder, ocap.NameRule),
			map[string]any{"field": "holder"})
		return
	}
	if !c.grantableTopic(ctx, path.topic) || !c.knownPartition(ctx, path.topic, path.partition) {
		return
	}
	bound := ttlBound{min: time.Second, max: c.cfg.Groups.Limits.LeaseTTLMax, key: "coordinator.groups.limits.lease_ttl_max", lasts: "a lease's capability"}
	if problem, details := bound.refusal(req.TTLMs); problem != "" {
		writeErrorDetails(ctx, api.CodeBadRequest, problem, details)
		return
	}
	msg, err := c.call(func(ref group.Ref) group.Event {
		return group.Lease{Ref: ref, Group: path.group, Topic: path.topic, Partition: path.partition, Holder: req.Holder, TTL: msDuration(req.TTLMs), Force: req.Force}
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
		r, err := c.renderGrants([]group.Grant{g}, true, time.Time{})
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
	var body struct {
		Offset   *int64 `json:"offset"`
		To       string `json:"to,omitempty"`
		Metadata string `json:"metadata,omitempty"`
		Force    bool   `json:"force,omitempty"`
	}
	if !decodeBody(ctx, &body, false) {
		return
	}
	if body.Offset == nil && body.To == "" {
		writeError(ctx, api.CodeBadRequest, "offset or to (earliest, latest) required")
		return
	}
	if !checkTexts(ctx, [2]string{"metadata", body.Metadata}) {
		return
	}
	req := OffsetResetRequest{To: body.To, Metadata: body.Metadata, Force: body.Force}
	if body.Offset != nil {
		req.Offset = *body.Offset
	}
	offset, ok := c.resetTarget(ctx, path, req)
	if !ok {
		return
	}
	msg, err := c.call(func(ref group.Ref) group.Event {
		return group.ResetOffset{Ref: ref, Group: path.group, Topic: path.topic, Partition: path.partition, Offset: offset, Metadata: req.Metadata, Force: req.Force}
	})
	reply, ok := msg.(group.ResetOffsetReply)
	if !ok {
		writeMachineError(ctx, msg, err)
		return
	}
	out := OffsetResetResponse{Group: path.group, Topic: path.topic, Partition: path.partition, Offset: offset}
	if l := reply.LeaseEnded; l != nil {
		out.LeaseEnded = &LeaseView{Holder: l.Holder, Outside: true, Until: timeText(l.Until)}
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
}

// resetTarget is the offset a reset asks for: explicit (within the log
// end), or Kafka's earliest or latest now. On a refusal it answers.
func (c *Coordinator) resetTarget(ctx *fasthttp.RequestCtx, path partitionPath, req OffsetResetRequest) (int64, bool) {
	if !c.knownPartition(ctx, path.topic, path.partition) {
		return 0, false
	}
	switch {
	case req.To == "" && req.Offset < 0:
		writeError(ctx, api.CodeBadRequest, fmt.Sprintf("offset must be >= 0, got %d", req.Offset))
		return 0, false
	case req.To == "":
		return req.Offset, c.withinLogEnd(ctx, []group.CommitOffset{{Topic: path.topic, Partition: path.partition, Offset: req.Offset}})
	case req.Offset != 0 || (req.To != group.OffsetResetEarliest && req.To != group.OffsetResetLatest):
		writeError(ctx, api.CodeBadRequest, "to must be earliest or latest, and then offset absent")
		return 0, false
	}
	// A floor above any offset bypasses the resolver's cache: "latest"
	// means the log end now.
	earliest, latest, err := c.offsets.lookupAbove(context.Background(), path.topic, path.partition, math.MaxInt64)
	if err != nil {
		writeError(ctx, api.CodeUnavailable, fmt.Sprintf("the offsets of %s/%d are unknown: %v", path.topic, path.partition, err))
		return 0, false
	}
	if req.To == group.OffsetResetEarliest {
		return earliest, true
	}
	return latest, true
}
