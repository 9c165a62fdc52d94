package coordinator

// Behavior: POST /v1/capabilities/attenuate — bearer: the parent
// capability (401 if it does not verify). Body api.AttenuateRequest; zero
// values keep the parent's setting. The child keeps the parent's holder,
// group, partition and epoch, never outlives it, and carries chn = the
// parent's ancestors plus the parent's jti, so denying any ancestor denies
// the child. Asking for more than the parent has (ops, offsets, lease,
// byte rate) is refused with 403 forbidden; a malformed request (unknown
// op, empty offset range) with 400; a parent for a topic no client is
// granted (Kafka's own, capgate's state logs: grantableTopic) with 403.
// Answers api.CapabilityResponse.
// The coordinator does not consult fences here: a child of a fenced parent
// carries the same epoch and is refused by every gateway.

import (
	"errors"

	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/ocap"
)

func (c *Coordinator) handleAttenuate(ctx *fasthttp.RequestCtx, _ []string) {
	parent, ok := c.bearerClaims(ctx, ocap.KindCapability, "parent capability")
	if !ok {
		return
	}
	if !c.allowRate(ctx, c.attenuates, parent.Root(), "attenuations of this capability's chain") {
		return
	}
	// And per tenant, in its tenant_member_rate: a chain's rate alone let
	// a tenant holding many capabilities (one per partition granted, a
	// new one at each renewal) have a signature minted 10 times a second
	// for each of them (redteam13 #4).
	if !c.allowRate(ctx, c.share.rate, attenuationTenant(parent), "requests of this capability's tenant (coordinator.tenant_member_rate)") {
		return
	}
	// No child for a topic no client is granted (one minted before its
	// name was reserved: no grant path mints one now).
	if !c.grantableTopic(ctx, parent.Topic) {
		return
	}
	var req api.AttenuateRequest
	if !decodeBody(ctx, &req, true) {
		return
	}
	a, ok := attenuation(ctx, req)
	if !ok {
		return
	}
	now := c.now()
	child, ttl, err := ocap.Attenuate(parent, a, now)
	switch {
	case errors.Is(err, ocap.ErrWiden):
		writeError(ctx, api.CodeForbidden, err.Error())
		return
	case errors.Is(err, ocap.ErrExpired):
		writeError(ctx, api.CodeTokenExpired, err.Error())
		return
	case err != nil:
		writeError(ctx, api.CodeBadRequest, err.Error())
		return
	}
	token, claims, err := c.keys.minter.Mint(ocap.KindCapability, child, now, ttl)
	if err != nil {
		writeError(ctx, api.CodeBadRequest, "mint child: "+err.Error())
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, api.CapabilityResponse{Capability: token, JTI: claims.ID, ExpiresAt: rfc3339(int64(claims.ExpiresAt))})
}

// attenuationTenant is whose tenant_member_rate an attenuation of parent
// spends: its tnt (the member's tenant it was granted to), else its
// holder (an admin grant's).
func attenuationTenant(parent *ocap.Claims) string {
	if parent.Tenant != "" {
		return parent.Tenant
	}
	return "sub\x00" + parent.Subject
}

// attenuation converts the request; it writes 400 for a malformed one.
func attenuation(ctx *fasthttp.RequestCtx, req api.AttenuateRequest) (ocap.Attenuation, bool) {
	var a ocap.Attenuation
	if len(req.Ops) > 0 {
		ops, err := ocap.ParseOps(req.Ops)
		if err != nil {
			writeError(ctx, api.CodeBadRequest, err.Error())
			return a, false
		}
		a.Ops = ops
	}
	if req.OffsetFrom != nil || req.OffsetTo != nil {
		r := ocap.OffsetRange{}
		if req.OffsetFrom != nil {
			r.From = *req.OffsetFrom
		}
		if req.OffsetTo != nil {
			r.To = *req.OffsetTo
		}
		a.Offsets = &r
	}
	if req.TTLMs < 0 || req.MaxBytesPerSec < 0 {
		writeError(ctx, api.CodeBadRequest, "ttl_ms and max_bytes_per_sec must be >= 0")
		return a, false
	}
	a.TTL = msDuration(req.TTLMs)
	a.MaxBytesPerSec = req.MaxBytesPerSec
	return a, true
}
