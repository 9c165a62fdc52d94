package coordinator

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
)

// handler serves one route; params are the path segments matched by "{}".
type handler func(ctx *fasthttp.RequestCtx, params []string)

// route is one method and path pattern. Name labels the request metrics.
type route struct {
	name    string
	method  string
	pattern []string
	handle  handler
}

// router matches requests against a fixed table. An unknown path gets 404,
// a known path with another method 405 with Allow; both with JSON bodies.
type router struct {
	routes []route
}

func (r *router) add(name, method, path string, h handler) {
	r.routes = append(r.routes, route{name: name, method: method, pattern: splitPath(path), handle: h})
}

func splitPath(path string) []string {
	return strings.Split(strings.Trim(path, "/"), "/")
}

// dispatch runs the matching route and returns its name.
func (r *router) dispatch(ctx *fasthttp.RequestCtx) string {
	segments := splitPath(string(ctx.Path()))
	method := string(ctx.Method())
	var allowed []string
	for i := range r.routes {
		rt := &r.routes[i]
		params, ok := match(rt.pattern, segments)
		if !ok {
			continue
		}
		if rt.method == method {
			rt.handle(ctx, params)
			return rt.name
		}
		allowed = append(allowed, rt.method)
	}
	if len(allowed) > 0 {
		ctx.Response.Header.Set("Allow", strings.Join(allowed, ", "))
		writeError(ctx, api.CodeMethodNotAllowed, method+" not allowed; use "+strings.Join(allowed, ", "))
		return "method_not_allowed"
	}
	writeError(ctx, api.CodeNotFound, noRoute(ctx.Path()))
	return "not_found"
}

// noRoute is a 404's message: the path asked for (at most 128 bytes, no
// query: tokens never reach a message) and what the coordinator serves,
// since the usual causes are a base URL with a path and a gateway's
// route sent to the coordinator.
func noRoute(path []byte) string {
	if api.TopicDetailsPath(path) {
		return fmt.Sprintf("no such route: %.128q; %s", path, api.TopicDetailsHint)
	}
	if bytes.HasPrefix(path, []byte("/v1/topics/")) {
		return fmt.Sprintf("no such route: %.128q; records are fetched and produced at a gateway, not at the coordinator: send this to a gateway's base URL", path)
	}
	return fmt.Sprintf("no such route: %.128q; the coordinator serves /v1/groups, /v1/groups/{group}, /v1/groups/{group}/(join|heartbeat|commit|leave|offsets|committed), /v1/capabilities/attenuate, /v1/admin/..., /v1/sync, /oauth/token, /console, /healthz, /readyz, /metrics, /openapi.json and /.well-known/jwks.json: is the URL the coordinator's base URL?", path)
}

func match(pattern, segments []string) ([]string, bool) {
	if len(pattern) != len(segments) {
		return nil, false
	}
	var params []string
	for i, p := range pattern {
		switch {
		case p == "{}":
			if segments[i] == "" {
				return nil, false
			}
			params = append(params, segments[i])
		case p != segments[i]:
			return nil, false
		}
	}
	return params, true
}

// newRouter lists every route of DESIGN §5 (one file per resource). The
// route names are the operationIds of api/openapi.yaml: a test walks this
// table against the document. admin and consumer wrap the routes with
// their authentication (tls.go).
func (c *Coordinator) newRouter() *router {
	r := &router{}
	get, post, put := fasthttp.MethodGet, fasthttp.MethodPost, fasthttp.MethodPut
	r.add("healthz", get, "/healthz", c.handleHealth)
	r.add("readyz", get, "/readyz", c.handleReady)
	r.add("metrics", get, "/metrics", c.handleMetrics)
	r.add("jwks", get, "/.well-known/jwks.json", c.handleJWKS)
	r.add("openapi", get, "/openapi.json", c.handleOpenAPI)
	r.add("sync", get, "/v1/sync", c.handleSync)
	r.add("sync_leave", post, "/v1/sync/leave", c.handleSyncLeave)
	r.add("join", post, "/v1/groups/{}/join", c.consumer(c.handleJoin))
	r.add("heartbeat", post, "/v1/groups/{}/heartbeat", c.consumer(c.handleHeartbeat))
	r.add("commit", post, "/v1/groups/{}/commit", c.consumer(c.handleCommit))
	r.add("leave", post, "/v1/groups/{}/leave", c.consumer(c.handleLeave))
	r.add("offsets", get, "/v1/groups/{}/offsets", c.consumerRead(c.handleOffsets))
	r.add("tenant_groups", get, "/v1/groups", c.consumerRead(c.handleTenantGroups))
	r.add("tenant_group", get, "/v1/groups/{}", c.consumerRead(c.handleTenantGroup))
	r.add("tenant_group_offsets", get, "/v1/groups/{}/committed", c.consumerRead(c.handleTenantGroupOffsets))
	r.add("attenuate", post, "/v1/capabilities/attenuate", c.consumer(c.handleAttenuate))
	r.add("admin_groups", get, "/v1/admin/groups", c.admin(c.handleAdminGroups))
	r.add("admin_group", get, "/v1/admin/groups/{}", c.admin(c.handleAdminGroup))
	r.add("admin_group_delete", fasthttp.MethodDelete, "/v1/admin/groups/{}", c.admin(c.handleAdminGroupDelete))
	r.add("admin_group_config", put, "/v1/admin/groups/{}/config", c.admin(c.handleAdminGroupConfig))
	r.add("admin_group_summary", get, "/v1/admin/groups/{}/summary", c.admin(c.handleAdminGroupSummary))
	r.add("admin_partition_revoke", post, "/v1/admin/groups/{}/partitions/{}/{}/revoke", c.admin(withReason(c.handleAdminPartitionRevoke)))
	r.add("admin_partition_lease", post, "/v1/admin/groups/{}/partitions/{}/{}/lease", c.admin(c.handleAdminPartitionLease))
	r.add("admin_partition_offset", put, "/v1/admin/groups/{}/partitions/{}/{}/offset", c.admin(c.handleAdminPartitionOffset))
	r.add("admin_member_revoke", post, "/v1/admin/groups/{}/members/{}/revoke", c.admin(withReason(c.handleAdminMemberRevoke)))
	r.add("admin_topics", get, "/v1/admin/topics", c.admin(c.handleAdminTopics))
	r.add("admin_topic", get, "/v1/admin/topics/{}", c.admin(c.handleAdminTopic))
	r.add("admin_gateways", get, "/v1/admin/gateways", c.admin(c.handleAdminGateways))
	r.add("admin_capabilities", post, "/v1/admin/capabilities", c.admin(c.handleAdminCapability))
	r.add("admin_capability_revoke", post, "/v1/admin/capabilities/{}/revoke", c.admin(withReason(c.handleAdminCapabilityRevoke)))
	r.add("admin_qos_list", get, "/v1/admin/qos", c.admin(c.handleAdminQoSList))
	r.add("admin_qos", put, "/v1/admin/qos", c.admin(c.handleAdminQoS))
	r.add("admin_clients", post, "/v1/admin/clients", c.admin(c.handleAdminClients))
	r.add("admin_keys_rotate", post, "/v1/admin/keys/rotate", c.admin(c.handleAdminKeysRotate))
	r.add("admin_audit", get, "/v1/admin/audit", c.admin(c.handleAdminAudit))
	r.add("oauth_token", post, "/oauth/token", c.consumer(c.handleOAuthToken))
	r.add("admin_oauth_client_create", post, "/v1/admin/oauth/clients", c.admin(c.handleAdminOAuthClientCreate))
	r.add("admin_oauth_clients", get, "/v1/admin/oauth/clients", c.admin(c.handleAdminOAuthClients))
	r.add("admin_oauth_client_revoke", post, "/v1/admin/oauth/clients/{}/revoke", c.admin(c.handleAdminOAuthClientRevoke))
	return r
}

// writeNotLeader is a replica's answer to a call only the leader serves
// (DESIGN §5): 421 not_leader naming the leader's URL in the body and in
// the Capgate-Leader header ("" and no header while no leader is known).
func writeNotLeader(ctx *fasthttp.RequestCtx, leaderURL, message string) {
	if leaderURL != "" {
		ctx.Response.Header.Set(api.HeaderLeader, leaderURL)
	}
	writeErrorDetails(ctx, api.CodeNotLeader, message, map[string]any{"leader": leaderURL})
}
