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
	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/driver"
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

// commitOffsets checks each offset's capability (driver.CommitOffsets)
// and returns the offsets with their epochs; on a refusal it writes the
// answer and returns false.
func (c *Coordinator) commitOffsets(ctx *fasthttp.RequestCtx, groupName, member string, offsets []api.CommitOffset, release bool) ([]group.CommitOffset, bool) {
	out, refusal := driver.CommitOffsets(capabilityVerifier{c}, groupName, member, offsets, release)
	if refusal != nil {
		writeError(ctx, refusal.Code, refusal.Message)
		return nil, false
	}
	if !c.withinLogEnd(ctx, out) {
		return nil, false
	}
	return out, true
}

// capabilityVerifier is the coordinator's driver.Verifier: signatures with
// its own keys (through the verified-token cache), then its deny-list.
type capabilityVerifier struct{ c *Coordinator }

func (v capabilityVerifier) Capability(token string) (*ocap.Claims, bool, error) {
	claims, err := v.c.verifySignature([]byte(token), ocap.KindCapability)
	if err != nil {
		return nil, false, err
	}
	return claims, v.c.revocations.refusal(claims, ocap.KindCapability, v.c.now()) != nil, nil
}
