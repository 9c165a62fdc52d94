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
//
// A repeat is answered as done: an entry whose epoch is no longer
// commit-able (the partition moved on) but whose offset and metadata
// are the partition's, committed under that very epoch — the commit it
// repeats landed (its answer lost: a replica frozen after the write, a
// hedged attempt) — is 200 with nothing applied, no write; a release
// repeated so never releases a newer epoch of the partition, even one
// that came back to the member. The committing epoch is kept with the
// offset (restored after a restart or takeover). An entry committed
// again unchanged under a current epoch writes nothing either.
//
// A commit (a release too) spends a token of its tenant's
// tenant_commit_rate (its own: an outside lease holder's is its holder's,
// outsideTenant), not the tenant_member_rate its heartbeats and their
// capabilities share: an SDK commits again as soon as its last commit
// is answered, and sharing a low member rate its commits took about half
// of it, each capability a member was owed costing the commits between.
// Past the burst it waits for its token up to 5 s, then 429 naming
// coordinator.tenant_commit_rate.
//
// An outside lease holder (POST …/lease to a holder that is not a
// member) has no member token: it commits with its lease capability as
// the bearer (grp = this group, op commit, else 403), each offset's
// capability being that one (it may be left out). The machine accepts it
// while the holder holds the partition, under the same epoch rules; a
// release is refused (400): its lease ends with its ttl or a revoke.

import (
	"errors"

	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/driver"
	"github.com/capgate/capgate/coordinator/group"
	"github.com/capgate/capgate/internal/failguard"
	"github.com/capgate/capgate/ocap"
)

func (c *Coordinator) handleCommit(ctx *fasthttp.RequestCtx, params []string) {
	var req api.CommitRequest
	groupName, claims, outside, ok := c.commitRequest(ctx, params, &req)
	if !ok {
		return
	}
	offsets, ok := c.commitOffsets(ctx, groupName, claims.Subject, req.Offsets, req.Release)
	if !ok {
		return
	}
	tenant := c.share.memberTenant(groupName, claims.Subject)
	if outside {
		tenant = outsideTenant(groupName, claims)
	}
	msg, shared, err := c.callSharedAt(ctx, tenant, c.share.commits, func(ref group.Ref) group.Event {
		return group.Commit{Ref: ref, Group: groupName, MemberID: claims.Subject, Offsets: offsets, Release: req.Release, Outside: outside}
	})
	if !shared {
		return
	}
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

// commitRequest is the preamble of a commit: a member's (memberRequest),
// or an outside lease holder's whose bearer is its lease capability
// (outside true; offsets without a capability get the bearer's).
func (c *Coordinator) commitRequest(ctx *fasthttp.RequestCtx, params []string, req *api.CommitRequest) (string, *ocap.Claims, bool, bool) {
	token := bearer(ctx)
	if cached, ok := c.tokens.Get(token, c.now()); token == nil || ok && cached.Kind() != ocap.KindCapability {
		return c.memberCommit(ctx, params, req) // a member token seen before: no parse
	}
	capability, err := c.verifyTokenFor(ctx, token, ocap.KindCapability)
	if errors.Is(err, ocap.ErrBadType) { // not a capability: a member token
		return c.memberCommit(ctx, params, req)
	}
	groupName := params[0]
	switch {
	case !groupParam(ctx, groupName):
		return "", nil, false, false
	case err != nil:
		writeTokenError(ctx, "capability", err)
		return "", nil, false, false
	case capability.Group != groupName || capability.Epoch == 0 || !capability.Ops.Has(ocap.OpCommit):
		writeError(ctx, api.CodeForbidden, "capability is not a lease capability of this group with the commit op")
		return "", nil, false, false
	case !decodeBody(ctx, req, false):
		return "", nil, false, false
	}
	for i := range req.Offsets {
		if req.Offsets[i].Capability == "" {
			req.Offsets[i].Capability = string(token)
		}
	}
	return groupName, capability, true, true
}

// memberCommit is commitRequest's member preamble.
func (c *Coordinator) memberCommit(ctx *fasthttp.RequestCtx, params []string, req *api.CommitRequest) (string, *ocap.Claims, bool, bool) {
	groupName, claims, ok := c.memberRequest(ctx, params, req, false)
	return groupName, claims, false, ok
}

// commitOffsets checks each offset's capability (driver.CommitOffsets)
// and returns the offsets with their epochs; on a refusal it writes the
// answer and returns false.
func (c *Coordinator) commitOffsets(ctx *fasthttp.RequestCtx, groupName, member string, offsets []api.CommitOffset, release bool) ([]group.CommitOffset, bool) {
	v := &capabilityVerifier{c: c, budget: budgetOf(ctx)}
	out, refusal := driver.CommitOffsets(v, groupName, member, offsets, release)
	if v.spent != nil {
		writeTokenError(ctx, "an offset's capability", v.spent)
		return nil, false
	}
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
// its own keys (through the verified-token cache), then its deny-list. A
// signature check is charged to the request's auth-failure budget as a
// bearer's is: checked without it, a member's commits with a forged
// capability each (a real kid and claims) were a signature check apiece
// for ever, where a forged bearer is refused unchecked past
// auth_failure_burst (redteam14 #7). spent is the budget's refusal.
type capabilityVerifier struct {
	c      *Coordinator
	budget budget
	spent  error
}

func (v *capabilityVerifier) Capability(token string) (*ocap.Claims, bool, error) {
	claims, err := v.c.signatureFor(v.budget, []byte(token), ocap.KindCapability)
	var spent *failguard.Spent
	if errors.As(err, &spent) {
		v.spent = err
	}
	if err != nil {
		return nil, false, err
	}
	return claims, v.c.revocations.refusal(claims, ocap.KindCapability, v.c.now()) != nil, nil
}
