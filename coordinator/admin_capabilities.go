package coordinator

// Behavior: admin, capabilities — bearer: an admin token.
//   POST /v1/admin/capabilities with SharedGrantRequest: mint a shared
//     (non-exclusive) capability for holder on one partition, directly —
//     no group, no epoch: it is fenced by its jti only and does not move
//     any group's partitions. ops default to fetch; ttl_ms is required,
//     at least 1000 and at most max_lease (400 naming the ttl asked, the
//     bound and, above it, its setting: details limit and max, in ms);
//     offset_from/offset_to add an offset caveat. 403 for a topic no
//     client is granted (Kafka's own, capgate's state logs:
//     grantableTopic), 404 for a partition Kafka does not have (once
//     metadata was read).
//     Answers api.CapabilityResponse.
//   POST /v1/admin/capabilities/{jti}/revoke with DenyRequest (may be
//     empty): deny the jti (and every capability chained from it) on all
//     gateways, and at the coordinator itself (a denied client credential
//     can no longer join, a denied capability no longer commits: 409
//     capability_revoked), until exp, or when exp is not given for as
//     long as any token lives (the longest of max_lease, member_token_ttl,
//     client_credential_ttl_max). An exp past now + that is refused with
//     400 (details limit and max, the latest exp accepted) and nothing is
//     denied: no token outlives it, and the coordinator, the store, the
//     sync log and every gateway would hold the entry until exp. A reason
//     with a control character is 400 (details field; text.go). Answers
//     DenyResponse once the denial is durable and queued for the
//     gateways.

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/group"
	"github.com/capgate/capgate/ocap"
)

func (c *Coordinator) handleAdminCapability(ctx *fasthttp.RequestCtx, _ []string) {
	var req SharedGrantRequest
	if !decodeBody(ctx, &req, false) {
		return
	}
	setAuditTarget(ctx, cut(req.Holder, 64)+"@"+cut(req.Topic, 64)+"/"+strconv.Itoa(int(req.Partition)))
	claims, ttl, ok := c.sharedGrant(ctx, req)
	if !ok {
		return
	}
	token, minted, err := c.keys.minter.Mint(ocap.KindCapability, claims, c.now(), ttl)
	if err != nil {
		writeError(ctx, api.CodeBadRequest, "mint: "+err.Error())
		return
	}
	partitions, _ := c.partitionCount(req.Topic)
	writeJSON(ctx, fasthttp.StatusOK, api.CapabilityResponse{Capability: token, JTI: minted.ID, ExpiresAt: rfc3339(int64(minted.ExpiresAt)), Partitions: partitions})
}

// sharedGrant validates the request into claims and a ttl, writing the
// refusal when it is not valid.
func (c *Coordinator) sharedGrant(ctx *fasthttp.RequestCtx, req SharedGrantRequest) (ocap.Claims, time.Duration, bool) {
	ttl := msDuration(req.TTLMs)
	ttlProblem, ttlDetails := ttlBound{min: time.Second, max: c.cfg.MaxLease, key: "coordinator.max_lease", lasts: "a capability"}.refusal(req.TTLMs)
	switch {
	case !ocap.ValidTopic(req.Topic):
		writeErrorDetails(ctx, api.CodeBadRequest, fmt.Sprintf("topic %.80q: a topic is %s", req.Topic, topicRule), map[string]any{"field": "topic"})
		return ocap.Claims{}, 0, false
	case req.Partition < 0:
		writeErrorDetails(ctx, api.CodeBadRequest, fmt.Sprintf("partition must be >= 0, got %d", req.Partition), map[string]any{"field": "partition"})
		return ocap.Claims{}, 0, false
	case !ocap.ValidName(req.Holder):
		writeErrorDetails(ctx, api.CodeBadRequest, fmt.Sprintf("holder %.80q: a holder is %s", req.Holder, ocap.NameRule), map[string]any{"field": "holder"})
		return ocap.Claims{}, 0, false
	case ttlProblem != "":
		writeErrorDetails(ctx, api.CodeBadRequest, ttlProblem, ttlDetails)
		return ocap.Claims{}, 0, false
	}
	if !c.grantableTopic(ctx, req.Topic) {
		return ocap.Claims{}, 0, false
	}
	if !c.knownPartition(ctx, req.Topic, req.Partition) {
		return ocap.Claims{}, 0, false
	}
	names := req.Ops
	if len(names) == 0 {
		names = []string{"fetch"}
	}
	ops, err := ocap.ParseOps(names)
	if err != nil {
		writeError(ctx, api.CodeBadRequest, err.Error())
		return ocap.Claims{}, 0, false
	}
	partition := req.Partition
	claims := ocap.Claims{Subject: req.Holder, Topic: req.Topic, Partition: &partition, Ops: ops}
	if req.OffsetFrom != nil || req.OffsetTo != nil {
		r := ocap.OffsetRange{}
		if req.OffsetFrom != nil {
			r.From = *req.OffsetFrom
		}
		if req.OffsetTo != nil {
			r.To = *req.OffsetTo
		}
		claims.Offsets = &r
	}
	return claims, ttl, true
}

func (c *Coordinator) handleAdminCapabilityRevoke(ctx *fasthttp.RequestCtx, params []string) {
	jti := params[0]
	if b, err := base64.RawURLEncoding.DecodeString(jti); err != nil || len(b) != 16 {
		writeError(ctx, api.CodeBadRequest, "jti must be 128 bits, base64url")
		return
	}
	var req DenyRequest
	if !decodeBody(ctx, &req, true) {
		return
	}
	// Without an exp, deny for as long as any kind of token lives: a
	// client credential may be the one denied. No token outlives that, so
	// a later exp is refused (denyExpires), not held for nothing.
	expires, ok := c.denyExpires(ctx, req.Exp)
	if !ok {
		return
	}
	msg, err := c.call(func(ref group.Ref) group.Event {
		return group.DenyJTI{Ref: ref, JTI: jti, Expires: expires}
	})
	if _, ok := msg.(group.Done); !ok {
		writeMachineError(ctx, msg, err)
		return
	}
	exp := expires.Unix()
	if expires.After(time.Unix(exp, 0)) {
		exp++
	}
	writeJSON(ctx, fasthttp.StatusOK, DenyResponse{JTI: jti, Exp: exp})
}

// denyExpires is until when a deny asking exp (unix seconds; 0: not
// given) holds: exp, or without one now + tokenTTLMax, the longest any
// token lives. A negative exp, or one past now + tokenTTLMax, is refused
// with 400 naming the bound (details limit and max, the latest exp
// accepted): a deny of a token id needs no more, and a deny of an IdP
// identity (whose tokens keep coming) must be renewed before it ends, so
// the operator is told rather than silently given less.
func (c *Coordinator) denyExpires(ctx *fasthttp.RequestCtx, exp int64) (time.Time, bool) {
	longest := c.cfg.tokenTTLMax()
	latest := c.now().Add(longest)
	switch {
	case exp == 0:
		return latest, true
	case exp < 0:
		writeError(ctx, api.CodeBadRequest, fmt.Sprintf("exp must be unix seconds, got %d", exp))
		return time.Time{}, false
	case time.Unix(exp, 0).After(latest):
		writeErrorDetails(ctx, api.CodeBadRequest,
			fmt.Sprintf("exp %d is after now + %s, the longest any token lives (the longest of max_lease, member_token_ttl, client_credential_ttl_max): omit exp to deny for that long", exp, longest),
			map[string]any{"limit": c.cfg.tokenTTLMaxName(), "max": latest.Unix()})
		return time.Time{}, false
	}
	return time.Unix(exp, 0), true
}
