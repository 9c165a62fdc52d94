package coordinator

// Behavior: a tenant's own groups, as the Kafka listener's ListGroups and
// DescribeGroups show them — bearer: a client credential or an IdP token
// (exactly what a join takes, never a member token or a capability; the
// gateway forwards the Kafka principal's own token and never the admin
// token). Only groups the bearer's grps patterns allow are ever named.
//
//   GET /v1/groups?after=&limit= → api.TenantGroupsResponse: the groups
//     its patterns allow, in name order after after, at most limit
//     (1..describe_page_max, and never more than tenantListPageMax,
//     1,000, the default) with Kafka's state (group.KafkaState);
//     next_after when more follow. Each pattern is a binary search into
//     the sorted names: a tenant's page never walks other tenants' names.
//   GET /v1/groups/{g} → api.TenantGroupDescription: state, assignor,
//     live members (ids, client id, topics, owned partitions), at most
//     tenantDescribeMembersMax members, describe_page_max owned
//     partitions and members of describe_bytes_max estimated JSON (at
//     least one; truncated: true beyond). 403 forbidden for a group the
//     bearer may not join — whether it exists or not, so names of other
//     tenants' groups cannot be probed — 404 not_found for an unknown one
//     it may.
//   GET /v1/groups/{g}/committed → api.OffsetsResponse: the group's
//     committed offsets, sorted (an unknown group has none) — Kafka's
//     OffsetFetch without a member (kadm FetchOffsets, KafkaJS
//     admin.fetchOffsets, lag exporters), for a bearer that may join the
//     group; 403 otherwise, whether it exists or not. Its member-token
//     twin is GET /v1/groups/{g}/offsets.
//   429 rate_limited (Retry-After) while the bearer's tenant has
//   tenantReadsMax of these reads in progress, or has spent its
//   tenant_member_rate (each read spends it by what it costs:
//   tenantRead);
//   400 for a bad group name, cursor, limit or unknown query parameter;
//   401/409 for the bearer as at join; 503 unavailable if the coordinator
//   failed closed.

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/group"
	"github.com/capgate/capgate/ocap"
)

// tenantListPageMax bounds the groups one GET /v1/groups answers: each
// costs a walk of its partitions (its state) inside the coordinator's
// loop.
const tenantListPageMax = 1000

// tenantDescribeMembersMax bounds the members one GET /v1/groups/{g}
// answers (Kafka's DescribeGroups has no paging).
const tenantDescribeMembersMax = 1000

func (c *Coordinator) handleTenantGroups(ctx *fasthttp.RequestCtx, _ []string) {
	claims, ok := c.tenantBearer(ctx)
	if !ok {
		return
	}
	q, ok := c.pageQuery(ctx, "after")
	if !ok {
		return
	}
	q.limit = min(q.limit, tenantListPageMax)
	out := api.TenantGroupsResponse{Groups: []api.TenantGroup{}}
	ok, err := c.tenantRead(ctx, tenant(claims), func(m *group.Machine) (cost int) {
		names, more := m.GroupsMatching(claims.Groups, q.get("after"), q.limit)
		for _, name := range names {
			if !claims.AllowsGroup(name) { // GroupsMatching's own rule, checked again
				continue
			}
			state, _ := m.KafkaState(name)
			cost += 1 + m.ReadCost(name, false)
			out.Groups = append(out.Groups, api.TenantGroup{Group: name, State: state})
		}
		if more {
			out.NextAfter = names[len(names)-1]
		}
		return cost
	})
	if !ok {
		return
	}
	if err != nil {
		writeMachineError(ctx, nil, err)
		return
	}
	c.writeTenantRead(ctx, tenant(claims), out)
}

func (c *Coordinator) handleTenantGroup(ctx *fasthttp.RequestCtx, params []string) {
	groupName := params[0]
	claims, ok := c.tenantGroupParam(ctx, groupName)
	if !ok {
		return
	}
	var v group.KafkaView
	found, hidden := false, false
	ok, err := c.tenantRead(ctx, tenant(claims), func(m *group.Machine) int {
		if hidden = m.UsesTopic(groupName, func(topic string) bool { return !claims.AllowsTopic(topic) }); !hidden {
			v, found = m.KafkaView(groupName, tenantDescribeMembersMax, c.cfg.DescribePageMax, c.cfg.DescribeBytesMax)
		}
		return m.ReadCost(groupName, true)
	})
	if !ok {
		return
	}
	if err != nil {
		writeMachineError(ctx, nil, err)
		return
	}
	// A group with a member subscribed to or owning a topic the bearer
	// may not subscribe to is not described at all, as Kafka 4.0
	// answers a group using a topic the principal may not describe
	// (KAFKA-18813; redteam11 #1) — every member checked, not only those
	// a truncated view shows, and the topic not named (redteam14 #8: a
	// hidden member past the cut let the group be described, and the
	// refusal named the topic the bearer may not see).
	if hidden {
		writeError(ctx, api.CodeForbidden, "group "+groupName+" has a member subscribed to or owning a topic the credential does not allow")
		return
	}
	if !found {
		writeError(ctx, api.CodeNotFound, "unknown group "+groupName)
		return
	}
	c.writeTenantRead(ctx, tenant(claims), tenantView(v))
}

func tenantView(v group.KafkaView) api.TenantGroupDescription {
	out := api.TenantGroupDescription{Group: v.Group, State: v.State, Assignor: v.Assignor, Truncated: v.Truncated,
		Members: make([]api.TenantMember, 0, len(v.Members))}
	for _, m := range v.Members {
		tm := api.TenantMember{MemberID: m.ID, InstanceID: m.InstanceID, ClientID: m.ClientID, Topics: m.Topics,
			Owned: make([]api.TenantPartition, 0, len(m.Owned))}
		if tm.Topics == nil {
			tm.Topics = []string{}
		}
		for _, p := range m.Owned {
			tm.Owned = append(tm.Owned, api.TenantPartition{Topic: p.Topic, Partition: p.Partition})
		}
		out.Members = append(out.Members, tm)
	}
	return out
}

func (c *Coordinator) handleTenantGroupOffsets(ctx *fasthttp.RequestCtx, params []string) {
	groupName := params[0]
	claims, ok := c.tenantGroupParam(ctx, groupName)
	if !ok {
		return
	}
	var offsets []api.CommittedOffset
	ok, err := c.tenantRead(ctx, tenant(claims), func(m *group.Machine) int {
		offsets = m.Offsets(groupName)
		return m.ReadCost(groupName, false)
	})
	if !ok {
		return
	}
	if err != nil {
		writeMachineError(ctx, nil, err)
		return
	}
	// Only the topics the bearer may subscribe to: another credential's
	// member of the group committed the rest (redteam11 #1), which the
	// Kafka listener's OffsetFetch leaves out (conn.topicsAuthorized).
	offsets = slices.DeleteFunc(offsets, func(o api.CommittedOffset) bool { return !claims.AllowsTopic(o.Topic) })
	if offsets == nil {
		offsets = []api.CommittedOffset{}
	}
	c.writeTenantRead(ctx, tenant(claims), api.OffsetsResponse{Offsets: offsets})
}

// tenantReadsMax bounds the tenant group reads one tenant (tenant: an
// OAuth client, an IdP identity, else the credential) has in progress at
// once; one more is 429 rate_limited. Each runs a walk of its groups'
// members and partitions inside the coordinator's loop, and a description
// lists every member's topics: one credential asking for a group of 300
// members subscribed to 1,000 topics each from 16 connections at once
// held every other tenant's heartbeat up to 2.6 s (from 0.2 ms) on a
// 2-core machine (redteam11 #2); at two at a time its share is bounded,
// however many connections it opens. The Kafka listener asks one at a
// time per request (ListGroups, each group of a DescribeGroups, an
// OffsetFetch without a member).
const tenantReadsMax = 2

// readItemsPerToken and readBytesPerToken price a tenant group read in
// its tenant's tenant_member_rate: a token, one more for each
// readItemsPerToken items it walked in the loop (group.Machine.ReadCost:
// partitions, members, their topics; ~15 µs of the loop, about a
// heartbeat's part of it) and one more for each readBytesPerToken bytes
// of its answer (the encoding and sending: ~45 µs, a third of a
// heartbeat's whole request). So a tenant's reads and member requests
// together hold at most the share tenant_member_rate gives it.
// tenantReadsMax bounded only how many were in progress: a tenant
// describing its group of 120 members with 1,000 topics each (18 ms of
// the loop, 25 MB of JSON a read) from two connections held the loop and
// a core, and another tenant's heartbeat went from 0.26 ms to 8.9 (p99
// 4 → 229 ms) (redteam14 #3).
const (
	readItemsPerToken = 100
	readBytesPerToken = 4096
)

// tenantRead runs fn, a tenant group read of tenant, in the loop: one of
// tenantReadsMax places, a token of the tenant's rate and a place of its
// loop share first (loopShare.take; on refusal the answer is written and
// ok is false), then the rest of what fn says it walked, as debt the
// tenant's next requests wait for.
func (c *Coordinator) tenantRead(ctx *fasthttp.RequestCtx, tenant string, fn func(*group.Machine) (cost int)) (ok bool, err error) {
	release, ok := c.tenantReads.start(ctx, tenant)
	if !ok {
		return false, nil
	}
	defer release()
	cost := 0
	ok, err = c.queryShared(ctx, tenant, func(m *group.Machine) { cost = fn(m) })
	if ok && err == nil {
		c.share.charge(tenant, cost/readItemsPerToken)
	}
	return ok, err
}

// writeTenantRead answers a tenant group read with v and spends the
// answer's bytes of tenant's rate.
func (c *Coordinator) writeTenantRead(ctx *fasthttp.RequestCtx, tenant string, v any) {
	writeJSON(ctx, fasthttp.StatusOK, v)
	c.share.charge(tenant, len(ctx.Response.Body())/readBytesPerToken)
}

// tenantReads counts the tenant group reads in progress per tenant.
type tenantReads struct {
	mu sync.Mutex
	n  map[string]int // only tenants with a read in progress
}

// start takes one of tenant's tenantReadsMax places, or answers 429
// rate_limited with Retry-After and returns false; release gives it back.
func (r *tenantReads) start(ctx *fasthttp.RequestCtx, tenant string) (release func(), ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n[tenant] >= tenantReadsMax {
		writeRateLimited(ctx, fmt.Sprintf("too many group reads of this credential at once (%d); retry later", tenantReadsMax), time.Second)
		return nil, false
	}
	if r.n == nil {
		r.n = map[string]int{}
	}
	r.n[tenant]++
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.n[tenant]--; r.n[tenant] <= 0 {
			delete(r.n, tenant)
		}
	}, true
}

// tenantGroupParam checks a tenant's request about one group: a valid
// name, a bearer that may join it (403 otherwise, whether the group
// exists or not), no query. It returns the bearer's claims; on failure it
// writes the answer.
func (c *Coordinator) tenantGroupParam(ctx *fasthttp.RequestCtx, groupName string) (*ocap.Claims, bool) {
	if !groupParam(ctx, groupName) {
		return nil, false
	}
	claims, ok := c.tenantBearer(ctx)
	if !ok {
		return nil, false
	}
	if !claims.AllowsGroup(groupName) {
		writeError(ctx, api.CodeForbidden, "client credential does not allow group "+groupName+allowedScope(claims, "groups", claims.Groups))
		return nil, false
	}
	if len(ctx.QueryArgs().QueryString()) > 0 {
		writeError(ctx, api.CodeBadRequest, "GET /v1/groups/{group} and /committed take no query parameters")
		return nil, false
	}
	return claims, true
}

// tenantBearer verifies the bearer as a join does for a new member: a
// client credential, or an IdP token mapped to its groups and topics.
// On failure it writes the answer.
func (c *Coordinator) tenantBearer(ctx *fasthttp.RequestCtx) (*ocap.Claims, bool) {
	token := bearer(ctx)
	if token == nil {
		writeError(ctx, api.CodeUnauthorized, "client credential (or identity provider token) required")
		return nil, false
	}
	if c.identities.Handles(token) {
		return c.identityClaims(ctx, token)
	}
	claims, err := c.verifyTokenFor(ctx, token, ocap.KindClient)
	if err != nil {
		writeTokenError(ctx, "client credential", err)
		return nil, false
	}
	return claims, true
}
