package kafkaproto

// Behavior: ListGroups v0–v5 and DescribeGroups v0–v5, for a tenant's own
// groups (what lag exporters, kadm and KafkaJS's admin read).
//
//   - Answered from the coordinator's view (GET /v1/groups and
//     GET /v1/groups/{group}, tenantgroups.go) with the connection's own
//     token: a client credential or IdP identity sees exactly the groups
//     its grps patterns allow — the groups it may join — and nothing of
//     any other group: not its name, members or offsets. A partition
//     capability's connection sees none.
//   - ListGroups lists them (absent, not refused: Kafka filters what a
//     principal may not describe), with protocol type "consumer", Kafka's
//     state (Empty, Stable, PreparingRebalance, CompletingRebalance: see
//     coordinator/group/kafkaview.go) and type "consumer" — KIP-848's:
//     the coordinator assigns, and members may use either protocol —, or
//     "classic" to a types filter (v5) naming only that: a capgate group
//     is both, DescribeGroups and ConsumerGroupDescribe (describe848.go)
//     both describe it (listedType; before, always "classic", so kadm's
//     DescribeConsumerGroups of all groups found none). The states
//     filter (v4+) matches case-insensitively, as Kafka's; a types
//     filter naming neither type lists nothing. Either filter over
//     listGroupsFilterMax entries answers INVALID_REQUEST (logged,
//     rate-limited), listing nothing; a client hanging up (or
//     half-closing) meanwhile ends the coordinator's paging at once,
//     answered COORDINATOR_NOT_AVAILABLE (hangup.go). At most
//     listGroupsMax groups (pages from the coordinator); beyond, the list
//     is cut. Only the gateway's first fetch lane answers (the others, the
//     same gateway advertised again, answer an empty list), so clients
//     that concatenate every broker's answer (KafkaJS) list each group
//     once.
//   - DescribeGroups: a group the connection may not join is
//     GROUP_AUTHORIZATION_FAILED whether it exists or not; an unknown one
//     it may join is state Dead without members (Kafka's answer); one a
//     member of which subscribes to or owns a topic the connection may
//     not see is TOPIC_AUTHORIZATION_FAILED (as ConsumerGroupDescribe:
//     hidesTopics — the listener builds the members' metadata, so it must
//     not show what Metadata hides). Members
//     carry capgate's member id (the Kafka member id for members this
//     gateway runs), client id, the client's host for members this
//     gateway runs ("" for others), subscription metadata and assignment
//     in Kafka's consumer protocol encoding (v0: topics; owned
//     partitions) built from what the coordinator says each owns; the
//     protocol is the capgate assignor; authorized operations (v3+, when
//     asked) READ and DESCRIBE. At most describeGroupsMax groups per
//     request, the rest INVALID_REQUEST; and at most
//     describeAnswerBytesMax of members over them (a group named twice
//     counted twice, the first with members whole), a group past it
//     INVALID_REQUEST with a message.
//   - A coordinator that cannot answer: COORDINATOR_NOT_AVAILABLE
//     (retriable) — never an empty answer that would read as "no groups".
//     So does a read asked while the connection's holder, or the gateway,
//     holds its cap of answers not yet written (answerRoom), throttled a
//     second, without asking the coordinator.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client"
)

// listGroupsMax bounds the groups one ListGroups answers (and the pages
// it reads from the coordinator: describe_page_max each).
const listGroupsMax = 10000

// describeGroupsMax bounds the groups one DescribeGroups describes (one
// coordinator call each).
const describeGroupsMax = 100

// listGroupsFilterMax bounds each ListGroups filter (StatesFilter v4+,
// TypesFilter v5): Kafka has five group states and three types; a filter
// longer than this is no filter a client sends, and the request answers
// INVALID_REQUEST listing nothing.
const listGroupsFilterMax = 16

func handleListGroups(c *conn, _ header, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListGroupsRequest)
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	if len(req.StatesFilter) > listGroupsFilterMax || len(req.TypesFilter) > listGroupsFilterMax {
		c.s.refused.Refused("kafka ListGroups", fmt.Sprintf("a filter of over %d entries (answered INVALID_REQUEST)", listGroupsFilterMax),
			append(c.logFields(false), zap.Int("states", len(req.StatesFilter)), zap.Int("types", len(req.TypesFilter)))...)
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp, nil
	}
	groupType := listedType(req.TypesFilter)
	if c.principal.capability() || !c.firstLane() || groupType == "" {
		return resp, nil
	}
	if code := c.checkClient(time.Now()); code != "" {
		if api.IsRetriable(code) {
			resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		}
		return resp, nil // a denied or expired credential sees nothing
	}
	if !c.answerRoom() {
		resp.ErrorCode, resp.ThrottleMillis = kerr.CoordinatorNotAvailable.Code, answerRoomThrottle
		return resp, nil
	}
	var listed []api.TenantGroup
	var err error
	c.watchHangUp(func(ctx context.Context) {
		listed, err = c.tenantGroupList(ctx) // a hang-up ends it: COORDINATOR_NOT_AVAILABLE below
	})
	if err != nil {
		resp.ErrorCode = coordinatorError(err)
		return resp, nil
	}
	states := stateSet(req.StatesFilter)
	for _, g := range listed {
		if !c.principal.Claims.AllowsGroup(g.Group) || !stateListed(states, g.State) {
			continue
		}
		rg := kmsg.NewListGroupsResponseGroup()
		rg.Group, rg.ProtocolType, rg.GroupState, rg.GroupType = g.Group, "consumer", g.State, groupType
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}

// tenantGroupList pages through the coordinator's list for this
// connection's token, up to listGroupsMax groups, within request_timeout
// (and ctx: the client hanging up ends it).
func (c *conn) tenantGroupList(ctx context.Context) ([]api.TenantGroup, error) {
	ctx, cancel := context.WithTimeout(ctx, c.s.cfg.RequestTimeout)
	defer cancel()
	reader := tenantGroupsOf(c.s)
	var out []api.TenantGroup
	after := ""
	for {
		page, err := reader.list(ctx, c.principal.Token, after)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Groups...)
		if len(out) >= listGroupsMax {
			return out[:listGroupsMax], nil
		}
		if page.NextAfter == "" || page.NextAfter <= after {
			return out, nil
		}
		after = page.NextAfter
	}
}

// firstLane reports a connection to the gateway's first fetch lane (its
// own node id, the group coordinator's).
func (c *conn) firstLane() bool {
	if len(c.s.lns) < 2 {
		return true
	}
	return portOf(c.nc.LocalAddr().String()) == portOf(c.s.lns[0].Addr().String())
}

// listedType is the type a ListGroups types filter lists capgate's
// groups as, "" when it does not list them. A capgate group is both of
// Kafka's consumer-protocol types — the coordinator assigns (KIP-848's
// "consumer"), its members may be classic, and DescribeGroups as well
// as ConsumerGroupDescribe describe it —, so a filter naming either
// lists it as the type it names: kadm's DescribeGroups of all groups
// lists "classic" ones, its DescribeConsumerGroups "consumer" ones, and
// both find it. No filter, or one naming both: "consumer".
func listedType(types []string) string {
	named := func(want string) bool {
		return slices.ContainsFunc(types, func(t string) bool { return strings.EqualFold(t, want) })
	}
	switch consumer, classic := named(groupTypeConsumer), named(groupTypeClassic); {
	case len(types) == 0 || consumer:
		return groupTypeConsumer
	case classic:
		return groupTypeClassic
	}
	return ""
}

// stateSet is a ListGroups states filter as a set of lower-case states,
// built once per request (nil: no filter).
func stateSet(states []string) map[string]struct{} {
	if len(states) == 0 {
		return nil
	}
	set := make(map[string]struct{}, len(states))
	for _, s := range states {
		set[strings.ToLower(s)] = struct{}{}
	}
	return set
}

// stateListed reports whether state passes the filter set (Kafka matches
// states case-insensitively).
func stateListed(set map[string]struct{}, state string) bool {
	if set == nil {
		return true
	}
	_, ok := set[strings.ToLower(state)]
	return ok
}

// coordinatorError is the Kafka error for a coordinator read that failed:
// retriable while it cannot answer, else the principal's refusal.
func coordinatorError(err error) int16 {
	code := client.CodeOf(err)
	if api.IsRetriable(code) {
		return kerr.CoordinatorNotAvailable.Code
	}
	switch code {
	case api.CodeForbidden, api.CodeUnauthorized, api.CodeTokenExpired, api.CodeCapabilityRevoked:
		return kerr.GroupAuthorizationFailed.Code
	}
	return kerr.UnknownServerError.Code
}

func handleDescribeGroups(c *conn, _ header, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	budget := &describeBudget{}
	room := c.answerRoom()
	if !room {
		resp.ThrottleMillis = answerRoomThrottle
	}
	for i, name := range req.Groups {
		if !room {
			rg := kmsg.NewDescribeGroupsResponseGroup()
			rg.Group, rg.ErrorCode = name, kerr.CoordinatorNotAvailable.Code
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		if i >= describeGroupsMax {
			rg := kmsg.NewDescribeGroupsResponseGroup()
			rg.Group, rg.ErrorCode = name, kerr.InvalidRequest.Code
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		rg, n := c.describeGroup(name, req.IncludeAuthorizedOperations)
		if !budget.take(n) {
			rg = kmsg.NewDescribeGroupsResponseGroup()
			rg.Group, rg.ErrorCode, rg.ErrorMessage = name, kerr.InvalidRequest.Code, kmsg.StringPtr(describeCut)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}

// describeGroup answers one group of a DescribeGroups, with its
// members' bytes (describedBytes; 0 when it has none to show).
func (c *conn) describeGroup(name string, operations bool) (kmsg.DescribeGroupsResponseGroup, int) {
	rg := kmsg.NewDescribeGroupsResponseGroup()
	rg.Group = name
	if rg.ErrorCode = c.groupAllowed(name, time.Now()); rg.ErrorCode != 0 {
		return rg, 0
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.s.cfg.RequestTimeout)
	defer cancel()
	d, err := tenantGroupsOf(c.s).describe(ctx, c.principal.Token, name)
	switch {
	case client.CodeOf(err) == api.CodeNotFound:
		rg.State = "Dead" // Kafka's answer for a group it does not know
		return rg, 0
	case err != nil:
		rg.ErrorCode = describeError(err)
		return rg, 0
	}
	if c.hidesTopics(d) {
		rg.ErrorCode = kerr.TopicAuthorizationFailed.Code // the listener builds the members' metadata: it shows no topic the connection may not see
		return rg, 0
	}
	rg.State, rg.ProtocolType = d.State, "consumer"
	if operations {
		rg.AuthorizedOperations = groupOperations
	}
	if len(d.Members) > 0 {
		rg.Protocol = d.Assignor
	}
	local := c.s.groups.localMembers(name)
	for _, m := range d.Members {
		rg.Members = append(rg.Members, describedMember(m, local[m.MemberID]))
	}
	return rg, describedBytes(d)
}

// localMember is what this gateway knows of a member it runs: its
// Kafka member id, the client's own client.id and host, its protocol,
// the member epoch (classic: generation) its client was last told, and a
// KIP-848 member's subscribed regex.
type localMember struct {
	kafkaID, clientID, host string
	kip848                  bool
	epoch                   int32
	regex                   string
}

// localMembers maps the capgate member ids of group's members this
// gateway runs to their Kafka member id and client host.
func (g *groups) localMembers(group string) map[string]localMember {
	g.mu.Lock()
	ms := make([]*member, 0)
	for ref, m := range g.byID {
		if ref.group == group {
			ms = append(ms, m)
		}
	}
	g.mu.Unlock()
	out := make(map[string]localMember, len(ms))
	for _, m := range ms {
		m.mu.Lock()
		if m.sess != nil {
			l := localMember{kafkaID: m.id, clientID: m.key.clientID, host: "/" + m.key.ip, kip848: m.kip848, epoch: m.epoch}
			if m.kip848 {
				l.regex = m.join.TopicPattern
				if m.regex != nil {
					l.regex = m.regex.text // the client's, matched by the listener
				}
			}
			out[m.sess.Member().ID] = l
		}
		m.mu.Unlock()
	}
	return out
}

// describedMember is one member in Kafka's words: its subscription and
// assignment encoded as Kafka's consumer protocol (version 0).
func describedMember(m api.TenantMember, local localMember) kmsg.DescribeGroupsResponseGroupMember {
	rm := kmsg.NewDescribeGroupsResponseGroupMember()
	rm.MemberID, rm.ClientID, rm.ClientHost = m.MemberID, m.ClientID, local.host
	if local.kafkaID != "" {
		rm.MemberID, rm.ClientID = local.kafkaID, local.clientID // the client's own, not capgate's cut of it
	}
	if m.InstanceID != "" {
		rm.InstanceID = kmsg.StringPtr(m.InstanceID)
	}
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = m.Topics
	rm.ProtocolMetadata = meta.AppendTo(nil)
	assignment := kmsg.NewConsumerMemberAssignment()
	for _, p := range m.Owned {
		if n := len(assignment.Topics); n == 0 || assignment.Topics[n-1].Topic != p.Topic {
			t := kmsg.NewConsumerMemberAssignmentTopic()
			t.Topic = p.Topic
			assignment.Topics = append(assignment.Topics, t)
		}
		t := &assignment.Topics[len(assignment.Topics)-1]
		t.Partitions = append(t.Partitions, p.Partition)
	}
	rm.MemberAssignment = assignment.AppendTo(nil)
	return rm
}
