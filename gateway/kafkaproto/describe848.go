package kafkaproto

// Behavior: ConsumerGroupDescribe v0–v1 (KIP-848's describe, key 69) of a
// tenant's own groups — DescribeGroups' twin (admingroups.go), answered
// from the same coordinator view (GET /v1/groups/{group}) with the
// connection's own token.
//
//   - A capgate group is what Kafka calls a consumer group (type
//     "consumer" in ListGroups; "classic" to a filter asking only for
//     that, listedType): the group coordinator assigns, and its members
//     may use either protocol — KIP-848 heartbeats or classic Join/Sync
//     (group848.go, groupclassic.go) —, as Kafka's consumer groups accept
//     classic members. So both describes answer it: DescribeGroups in the
//     classic shape, ConsumerGroupDescribe in KIP-848's.
//   - A group the connection may not join is GROUP_AUTHORIZATION_FAILED
//     whether it exists or not; an unknown one it may join is
//     GROUP_ID_NOT_FOUND (Kafka's answer here; DescribeGroups says Dead);
//     one whose members subscribe to or own a topic the connection may not
//     see (a member of another credential's topics) TOPIC_AUTHORIZATION_FAILED
//     without its description, as Kafka 4.0 answers (KAFKA-18813;
//     hidesTopics, DescribeGroups likewise).
//   - State, in KIP-848's words from capgate's (coordinator/group/
//     kafkaview.go): Empty, Stable, and Reconciling while a partition is
//     handed off or a grant is pending — capgate's coordinator computes
//     the target at once, so a group is never Assigning.
//   - Members as in DescribeGroups (ids, client id, host, instance id) and:
//     MemberType (v1) consumer for a KIP-848 member this gateway runs,
//     classic for a classic one, -1 (unknown) for members of other
//     gateways and capgate's own SDK members; MemberEpoch the member
//     epoch this gateway told its client (a classic member's generation,
//     as Kafka's consumer groups count classic members), -1 for members
//     it does not run; SubscribedTopicNames the coordinator's (a pattern
//     member: the topics its pattern resolved to), SubscribedTopicRegex a
//     KIP-848 member's own regex when this gateway runs it; Assignment
//     and TargetAssignment both the partitions the coordinator says the
//     member owns (topic ids from Kafka's metadata): capgate's target
//     lives in its coordinator, and a partition being handed off is in
//     neither until it is granted.
//   - GroupEpoch and AssignmentEpoch: the highest member epoch this
//     gateway knows in the group (0 when it runs none). capgate fences
//     each partition by its own epoch and keeps no group epoch; clients
//     display these, never compare them.
//   - AuthorizedOperations, when asked: READ and DESCRIBE (the tenant may
//     join and describe its group; deleting it or its offsets is not
//     served).
//   - Bounds as DescribeGroups and OffsetFetch: at most describeGroupsMax
//     groups, the rest INVALID_REQUEST with a message (logged within
//     refusallog's bound), and describeAnswerBytesMax of members over
//     them (a group named twice counted twice: it is in the answer twice;
//     the first with members whole; a group past it INVALID_REQUEST with
//     a message); a group named twice read once; every
//     coordinator read of the request within one request_timeout; a
//     client hanging up (or half-closing, or the listener closing) ends
//     the read in flight at once, and the request is answered as for a
//     coordinator that cannot answer: COORDINATOR_NOT_AVAILABLE (the rest
//     not read; hangup.go).

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client"
)

// Kafka's group types (ListGroups v5): a capgate group is listed as
// either (listedType), "consumer" unless a filter asks for "classic".
const (
	groupTypeConsumer = "consumer"
	groupTypeClassic  = "classic"
)

// groupOperations is what a tenant may do with a group it may join, as
// Kafka's authorized-operations bit field: READ (3) and DESCRIBE (8).
const groupOperations = 1<<3 | 1<<8

// KIP-848 member types (ConsumerGroupDescribe v1; -1, unknown, is
// kmsg's default).
const (
	memberTypeClassic  = 0
	memberTypeConsumer = 1
)

func handleConsumerGroupDescribe(c *conn, _ header, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ConsumerGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	refused := 0
	c.watchHangUp(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, c.s.cfg.RequestTimeout)
		defer cancel()
		type description struct {
			rg kmsg.ConsumerGroupDescribeResponseGroup
			n  int // its members' bytes (describedBytes)
		}
		described := map[string]description{}
		budget := &describeBudget{}
		room := c.answerRoom()
		if !room {
			resp.ThrottleMillis = answerRoomThrottle
		}
		for i, name := range req.Groups {
			if i >= describeGroupsMax {
				rg := kmsg.NewConsumerGroupDescribeResponseGroup()
				rg.Group, rg.ErrorCode = name, kerr.InvalidRequest.Code
				if i == describeGroupsMax { // once: ~40 bytes a group made a 10 KB request of empty names a 636 KB answer (redteam19 #2)
					rg.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("at most %d groups are described per request", describeGroupsMax))
				}
				resp.Groups = append(resp.Groups, rg)
				refused++
				continue
			}
			d, ok := described[name]
			if !ok && (hungUp(ctx) || !room) { // the rest answered as the coordinator unreachable, not read
				d.rg = kmsg.NewConsumerGroupDescribeResponseGroup()
				d.rg.Group, d.rg.ErrorCode = name, kerr.CoordinatorNotAvailable.Code
				ok = true
			}
			if !ok {
				d.rg, d.n = c.describeConsumerGroup(ctx, name, req.IncludeAuthorizedOperations)
				described[name] = d
			}
			rg := d.rg
			if !budget.take(d.n) { // a group named twice is in the answer twice
				rg = kmsg.NewConsumerGroupDescribeResponseGroup()
				rg.Group, rg.ErrorCode, rg.ErrorMessage = name, kerr.InvalidRequest.Code, kmsg.StringPtr(describeCut)
			}
			resp.Groups = append(resp.Groups, rg)
		}
	})
	if refused > 0 {
		c.s.refused.Refused("kafka ConsumerGroupDescribe", fmt.Sprintf("%d groups, at most %d answered: answered INVALID_REQUEST", len(req.Groups), describeGroupsMax),
			append(c.logFields(false), zap.Int("groups_refused", refused))...)
	}
	return resp, nil
}

// describeConsumerGroup answers one group of a ConsumerGroupDescribe.
func (c *conn) describeConsumerGroup(ctx context.Context, name string, operations bool) (kmsg.ConsumerGroupDescribeResponseGroup, int) {
	rg := kmsg.NewConsumerGroupDescribeResponseGroup()
	rg.Group = name
	if rg.ErrorCode = c.groupAllowed(name, time.Now()); rg.ErrorCode != 0 {
		return rg, 0
	}
	d, err := tenantGroupsOf(c.s).describe(ctx, c.principal.Token, name)
	switch {
	case client.CodeOf(err) == api.CodeNotFound:
		rg.ErrorCode = kerr.GroupIDNotFound.Code
		rg.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("Group %s not found.", name))
		return rg, 0
	case err != nil:
		if rg.ErrorCode = describeError(err); rg.ErrorCode == kerr.TopicAuthorizationFailed.Code {
			rg.ErrorMessage = kmsg.StringPtr(hiddenTopicsMessage)
		}
		return rg, 0
	}
	if c.hidesTopics(d) {
		rg.ErrorCode = kerr.TopicAuthorizationFailed.Code
		rg.ErrorMessage = kmsg.StringPtr(hiddenTopicsMessage)
		return rg, 0
	}
	rg.State, rg.AssignorName = consumerGroupState(d.State), d.Assignor
	local := c.s.groups.localMembers(name)
	var ids map[string][16]byte
	if len(d.Members) > 0 {
		ids = c.topicIDs(ctx)
	}
	for _, m := range d.Members {
		rm := consumerGroupMember(m, local[m.MemberID], ids)
		rg.Epoch = max(rg.Epoch, rm.MemberEpoch)
		rg.Members = append(rg.Members, rm)
	}
	rg.AssignmentEpoch = rg.Epoch
	if operations {
		rg.AuthorizedOperations = groupOperations
	}
	return rg, describedBytes(d)
}

// hiddenTopicsMessage says why a group that uses topics the connection
// may not see is not described (Kafka's words, KAFKA-18813).
const hiddenTopicsMessage = "The described group uses topics that the client is not authorized to describe."

// describeError is the Kafka error of a group description the
// coordinator refused, once groupAllowed let the group through: its 403
// then says a member subscribes to or owns a topic the credential does
// not allow (the coordinator describes such a group to no one else:
// redteam11 #1), TOPIC_AUTHORIZATION_FAILED as hidesTopics answers it.
func describeError(err error) int16 {
	if client.CodeOf(err) == api.CodeForbidden {
		return kerr.TopicAuthorizationFailed.Code
	}
	return coordinatorError(err)
}

// hidesTopics reports whether a member of d subscribes to or owns a
// topic the connection may not see (another member's credential covers
// it): Kafka answers such a group TOPIC_AUTHORIZATION_FAILED without its
// description (KAFKA-18813, Kafka 4.0), as OffsetFetch answers such a
// topic's offsets (offsets.go) — a group shared by credentials of
// different topics shows neither side the other's.
func (c *conn) hidesTopics(d api.TenantGroupDescription) bool {
	for _, m := range d.Members {
		for _, topic := range m.Topics {
			if !c.sees(topic, topicInfo{}) {
				return true
			}
		}
		for _, p := range m.Owned {
			if !c.sees(p.Topic, topicInfo{}) {
				return true
			}
		}
	}
	return false
}

// consumerGroupState is a KIP-848 group state from the coordinator's
// (classic-named) Kafka state.
func consumerGroupState(classic string) string {
	switch classic {
	case "PreparingRebalance", "CompletingRebalance":
		return "Reconciling"
	}
	return classic // Empty, Stable
}

// topicIDs are Kafka's topic ids by name (none when the topic list
// cannot be read: the assignments then carry names only).
func (c *conn) topicIDs(ctx context.Context) map[string][16]byte {
	topics, _, err := c.s.topics.get(ctx, false)
	out := make(map[string][16]byte, len(topics))
	if err != nil {
		return out
	}
	for name, ti := range topics {
		out[name] = ti.id
	}
	return out
}

// consumerGroupMember is one member in KIP-848's words; local is what
// this gateway knows of it (zero for a member it does not run).
func consumerGroupMember(m api.TenantMember, local localMember, ids map[string][16]byte) kmsg.ConsumerGroupDescribeResponseGroupMember {
	rm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
	rm.MemberID, rm.ClientID, rm.MemberEpoch = m.MemberID, m.ClientID, -1
	rm.SubscribedTopics = m.Topics
	if rm.SubscribedTopics == nil {
		rm.SubscribedTopics = []string{}
	}
	if m.InstanceID != "" {
		rm.InstanceID = kmsg.StringPtr(m.InstanceID)
	}
	if local.kafkaID != "" {
		rm.MemberID, rm.ClientID, rm.ClientHost, rm.MemberEpoch = local.kafkaID, local.clientID, local.host, local.epoch
		rm.MemberType = memberTypeClassic
		if local.kip848 {
			rm.MemberType = memberTypeConsumer
		}
		if local.regex != "" {
			rm.SubscribedTopicRegex = kmsg.StringPtr(local.regex)
		}
	}
	for _, p := range m.Owned {
		ts := rm.Assignment.TopicPartitions
		if n := len(ts); n == 0 || ts[n-1].Topic != p.Topic {
			t := kmsg.NewAssignmentTopicPartition()
			t.Topic, t.TopicID = p.Topic, ids[p.Topic]
			rm.Assignment.TopicPartitions = append(ts, t)
		}
		t := &rm.Assignment.TopicPartitions[len(rm.Assignment.TopicPartitions)-1]
		t.Partitions = append(t.Partitions, p.Partition)
	}
	rm.TargetAssignment = rm.Assignment
	return rm
}
