package coordinator

// Behavior: POST /v1/groups/{group}/commit — bearer: the member token.
// Body api.CommitRequest. Every offset carries the capability it is
// committed under; each is verified (401 if it does not) and must be a
// partition capability of this group (grp, else 403) held by this member
// (sub, else 403) for exactly the entry's topic and partition (else 403)
// with the commit op (else 403). Its ep goes to the machine, which accepts
// only the partition's current epoch, or the holder's epoch while the
// partition is being revoked from it (else 409 stale_epoch), and never an
// offset below the committed one (409 offset_regression). All or nothing.
// release:true is the PartitionCommitted notice for the listed partitions
// (offset < 0 then releases without committing). A capability whose jti
// was denied commits nothing (409 capability_revoked) except in a
// release, its holder's last word. The answer is
// api.CommitResponse with the offsets now committed.

import (
	"fmt"

	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/group"
	"github.com/capgate/capgate/ocap"
)

func (c *Coordinator) handleCommit(ctx *fasthttp.RequestCtx, params []string) {
	var req api.CommitRequest
	groupName, claims, ok := c.memberRequest(ctx, params, &req, false)
	if !ok {
		return
	}
	offsets, ok := c.commitOffsets(ctx, groupName, claims.Subject, req.Offsets, req.Release)
	if !ok {
		return
	}
	msg, err := c.call(func(ref group.Ref) group.Event {
		return group.Commit{Ref: ref, Group: groupName, MemberID: claims.Subject, Offsets: offsets, Release: req.Release}
	})
	reply, ok := msg.(group.CommitReply)
	if !ok {
		writeMachineError(ctx, msg, err)
		return
	}
	committed := reply.Committed
	if committed == nil {
		committed = []api.CommittedOffset{}
	}
	writeJSON(ctx, fasthttp.StatusOK, api.CommitResponse{Committed: committed})
}

// commitOffsets checks each offset's capability and returns the offsets
// with their epochs; on a refusal it writes the answer and returns false.
func (c *Coordinator) commitOffsets(ctx *fasthttp.RequestCtx, groupName, member string, offsets []api.CommitOffset, release bool) ([]group.CommitOffset, bool) {
	out := make([]group.CommitOffset, 0, len(offsets))
	for i, o := range offsets {
		if o.Offset < 0 && !release {
			writeError(ctx, api.CodeBadRequest, fmt.Sprintf("offsets[%d]: offset must be >= 0", i))
			return nil, false
		}
		if o.Capability == "" {
			writeError(ctx, api.CodeUnauthorized, fmt.Sprintf("offsets[%d]: capability required", i))
			return nil, false
		}
		capability, err := c.verifySignature([]byte(o.Capability), ocap.KindCapability)
		if err == nil && c.denied.denies(capability, c.now()) {
			// A denied capability commits nothing, except when its holder
			// gives the partition up: the member (its member token is
			// valid) stopped on the gateway's 409 and releases with the
			// offset it processed, so the next holder repeats nothing.
			if !release {
				err = errDenied
			}
		}
		if err != nil {
			writeTokenError(ctx, fmt.Sprintf("offsets[%d]: capability", i), err)
			return nil, false
		}
		if reason := commitRefusal(capability, groupName, member, o); reason != "" {
			writeError(ctx, api.CodeForbidden, fmt.Sprintf("offsets[%d]: %s", i, reason))
			return nil, false
		}
		out = append(out, group.CommitOffset{
			Topic: o.Topic, Partition: o.Partition, Epoch: capability.Epoch, Offset: o.Offset, Metadata: o.Metadata,
		})
	}
	return out, true
}

// commitRefusal says why a verified capability may not commit o, or "".
func commitRefusal(capability *ocap.Claims, groupName, member string, o api.CommitOffset) string {
	switch {
	case capability.Group != groupName || capability.Epoch == 0:
		return "capability is not a partition capability of this group"
	case capability.Subject != member:
		return "capability belongs to another holder"
	case capability.Topic != o.Topic || capability.PartitionNumber() != o.Partition:
		return "capability is for another topic or partition"
	case !capability.Ops.Has(ocap.OpCommit):
		return "capability does not allow commit"
	case capability.Offsets != nil && o.Offset >= 0 && !capability.Offsets.Contains(o.Offset) && o.Offset != capability.Offsets.To:
		return "offset outside the capability's offset range"
	}
	return ""
}
