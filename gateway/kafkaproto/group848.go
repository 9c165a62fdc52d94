package kafkaproto

// Behavior: ConsumerGroupHeartbeat v0–v1 (KIP-848).
//
//   - Epoch 0 joins: the gateway joins capgate's coordinator for the
//     member with the connection's client credential (subscribed topic
//     names, or the regex as capgate's topic_pattern; the instance id for
//     static membership; the client.id as a capgate client_id,
//     capgateClientID: any client.id Kafka allows joins; the client's
//     assignor is ignored — capgate's
//     group assignor decides) and answers member epoch 1 with what the
//     member holds right away. A regex matching no topic is no error, as
//     in Kafka (nothing assigned until one is created): the gateway logs
//     it (warnNoTopicMatches). Topic names of which some are not in
//     Kafka join with the others, and the missing ones once created; only
//     missing ones answer UNKNOWN_TOPIC_OR_PARTITION (missingtopics.go).
//     A known member id rejoining at epoch 0 (a
//     lost answer, a fenced epoch) keeps its capgate member and gets its
//     whole assignment again.
//   - A heartbeat whose subscription (SubscribedTopicNames or the regex)
//     differs from the member's changes it at the coordinator first
//     (member.resubscribe: a rejoin of the capgate member with the new
//     topics), so the new topics' partitions are assigned and a dropped
//     topic's revoked; a refusal answers the heartbeat's error
//     (resubscribeError) and keeps the old subscription.
//   - Later heartbeats: the assignment is what the capgate session holds
//     minus partitions whose revoke waits for the member; each change
//     bumps the member epoch. The partitions the member reports owning
//     acknowledge revokes (see member.go); a keepalive (no Topics)
//     acknowledges nothing. An epoch that is neither the current one nor
//     the one before (a lost answer) is FENCED_MEMBER_EPOCH; an unknown or
//     expired member UNKNOWN_MEMBER_ID: the client rejoins.
//   - HeartbeatIntervalMillis is kafka_heartbeat_interval while nothing
//     moves, and handoffInterval (20 ms at most) while a handoff involves
//     the member — a revoke it must acknowledge, a new assignment it must
//     act on, or its first second as a member (grants are on their way) —
//     so a handoff costs round trips, not heartbeat intervals, whatever
//     the steady interval. Epoch -1/-2 leaves (the member's partitions are
//     released at its committed offsets).

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/client/session"
)

func handleConsumerGroupHeartbeat(c *conn, h header, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ConsumerGroupHeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	resp.HeartbeatIntervalMillis = int32(c.s.cfg.HeartbeatInterval.Milliseconds())
	now := time.Now()
	if code := c.groupAllowed(req.Group, now); code != 0 {
		resp.ErrorCode = code
		return resp, nil
	}
	id := req.MemberID
	switch {
	case req.MemberEpoch < 0: // -1 leave, -2 static leave
		if c.s.groups.taken(req.Group, id, c.key()) {
			resp.ErrorCode = kerr.UnknownMemberID.Code // another client's member
			return resp, nil
		}
		if m := c.s.groups.own(req.Group, id, c.key()); m != nil {
			m.close()
		}
		resp.MemberID, resp.MemberEpoch = &id, req.MemberEpoch
		return resp, nil
	case req.MemberEpoch == 0:
		return c.join848(req, resp, h.clientID, now)
	}
	m := c.s.groups.own(req.Group, id, c.key())
	if m == nil || !m.kip848 {
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp, nil
	}
	if code := c.resubscribe848(m, req); code != 0 {
		resp.ErrorCode, resp.MemberID, resp.MemberEpoch = code, &id, req.MemberEpoch
		return resp, nil
	}
	owned := c.ownedByID(req.Topics)
	epoch, assignment, code := m.heartbeat848(req.MemberEpoch, owned, now)
	resp.ErrorCode, resp.MemberID, resp.MemberEpoch = code, &id, epoch
	if code == 0 && assignment != nil {
		resp.Assignment = c.assignment848(assignment)
	}
	resp.HeartbeatIntervalMillis = c.heartbeatInterval(m, assignment != nil, now)
	return resp, nil
}

// join848 admits a member at epoch 0. clientID is the request's
// client.id as sent: the join's capgate client_id is made of it
// (capgateClientID), not of the connection's kept form.
func (c *conn) join848(req *kmsg.ConsumerGroupHeartbeatRequest, resp *kmsg.ConsumerGroupHeartbeatResponse, clientID string, now time.Time) (kmsg.Response, error) {
	if len(req.MemberID) > memberIDMax {
		why := fmt.Sprintf("member id of %d bytes: at most %d (Kafka clients send 22-character UUIDs)", len(req.MemberID), memberIDMax)
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, &why
		return resp, nil
	}
	if c.s.groups.taken(req.Group, req.MemberID, c.key()) {
		resp.ErrorCode = kerr.UnknownMemberID.Code // another client's member: never replaced from here
		return resp, nil
	}
	if m := c.s.groups.own(req.Group, req.MemberID, c.key()); m != nil && m.kip848 {
		if code := c.resubscribe848(m, req); code != 0 {
			resp.ErrorCode = code
			return resp, nil
		}
		if epoch, assignment, ok := m.rejoin848(now); ok {
			resp.MemberID, resp.MemberEpoch = &m.id, epoch
			resp.Assignment = c.assignment848(assignment)
			resp.HeartbeatIntervalMillis = c.heartbeatInterval(m, true, now)
			return resp, nil
		}
	}
	m := &member{
		g: c.s.groups, group: req.Group, id: req.MemberID, key: c.key(), kip848: true,
		sessionTimeout:   c.s.cfg.MemberSessionTimeout,
		rebalanceTimeout: c.rebalanceTimeout(req.RebalanceTimeoutMillis),
	}
	join := api.JoinRequest{ClientID: capgateClientID(clientID)}
	join.Topics, join.TopicPattern, _ = subscription848(req)
	if join.TopicPattern != "" && c.matchesOwnRegex() {
		names, rs, code, why := c.matchRegex(req.Group, join.TopicPattern, nil, true)
		if code != 0 {
			resp.ErrorCode, resp.ErrorMessage = code, &why
			return resp, nil
		}
		join.Topics, join.TopicPattern, m.regex = names, "", rs
	}
	var missing []string
	if join.TopicPattern == "" && m.regex == nil {
		var code int16
		var why string
		if join.Topics, missing, code, why = c.subscribePresent(req.Group, join.Topics); code != 0 {
			resp.ErrorCode, resp.ErrorMessage = code, &why
			return resp, nil
		}
	}
	if req.InstanceID != nil {
		join.InstanceID = *req.InstanceID
	}
	if code, err := c.joinMember(m, join); err != nil {
		resp.ErrorCode = joinError(code)
		msg := err.Error()
		resp.ErrorMessage = &msg
		return resp, nil
	}
	m.awaiting(req.SubscribedTopicNames, missing)
	epoch, assignment, _ := m.rejoin848(now)
	resp.MemberID, resp.MemberEpoch = &m.id, epoch
	resp.Assignment = c.assignment848(assignment)
	resp.HeartbeatIntervalMillis = c.heartbeatInterval(m, true, now)
	return resp, nil
}

// memberIDMax bounds the member id a KIP-848 client joins with: the
// member keeps it for its life (its key, its log lines, describes), and
// ConsumerGroupHeartbeat's compact strings may be as long as the frame
// (kafka_max_request_bytes, 8 MiB) — a tenant's members held ~4 MB each
// (TestMemberJoinsHoldBoundedText). KIP-1082 ids are 22-character UUIDs;
// the longest name capgate takes anywhere (ocap.ValidName) is 255.
const memberIDMax = 255

// warnNoTopicMatches logs a member whose topic regex (a KIP-848
// SubscribedTopicRegex, capgate's topic_pattern) matches no topic, as the
// coordinator's join answer counts them (matches: nil without a pattern
// or before its first metadata read). The member holds nothing until a
// matching topic is created, which is no error in Kafka either — but it
// was said nowhere (newuser5 #18). The heartbeat cannot say it: its
// ErrorMessage goes with an error code, and the client would fail on one.
// Under mu or before the member is shared.
func (m *member) warnNoTopicMatches(pattern string, matches *int) {
	if pattern == "" || matches == nil || *matches != 0 {
		return
	}
	m.log.Warn("kafka member's "+client.NoTopicMatches(pattern), zap.String("topic_pattern", pattern))
}

// subscription848 is the subscription a heartbeat carries (the regex
// when there is one); ok false when it carries none (unchanged).
func subscription848(req *kmsg.ConsumerGroupHeartbeatRequest) (topics []string, pattern string, ok bool) {
	switch {
	case req.SubscribedTopicRegex != nil:
		return nil, *req.SubscribedTopicRegex, true
	case req.SubscribedTopicNames != nil:
		return req.SubscribedTopicNames, "", true
	}
	return nil, "", false
}

// resubscribe848 carries a heartbeat's changed subscription to the
// coordinator (member.resubscribe); 0 when it carries none, the same, or
// the change was made, else the heartbeat's error.
func (c *conn) resubscribe848(m *member, req *kmsg.ConsumerGroupHeartbeatRequest) int16 {
	topics, pattern, ok := subscription848(req)
	switch {
	case !ok || m.subscribed(topics, pattern):
		if names, rs, changed := c.rematchRegex(m); changed {
			return c.resubscribeRegex(m, names, rs) // a topic its regex matches was created or deleted
		}
		if topics, ok = c.awaitedCreated(m); !ok {
			return 0
		}
		pattern = "" // a topic it waited for was created: join it
	case pattern != "" && c.matchesOwnRegex():
		names, rs, code, _ := c.matchRegex(m.group, pattern, nil, true)
		if code != 0 {
			return code
		}
		return c.resubscribeRegex(m, names, rs)
	}
	var missing []string
	if pattern == "" {
		var code int16
		if topics, missing, code, _ = c.subscribePresent(m.group, topics); code != 0 {
			return code
		}
	}
	wanted := topics
	if len(missing) > 0 {
		wanted = append(slices.Clone(topics), missing...)
	}
	code := resubscribeError(m.resubscribe(c.ctx, topics, pattern))
	if code == 0 {
		m.awaiting(wanted, missing)
		m.setRegex(nil)
	}
	return code
}

// resubscribeError maps a refused subscription change: a topic the
// credential does not cover is TOPIC_AUTHORIZATION_FAILED (as Kafka
// answers a subscription it may not describe); a member the coordinator
// forgot UNKNOWN_MEMBER_ID (the client joins again, as a new member, with
// its new subscription); the rest as a refused join.
func resubscribeError(code api.Code) int16 {
	switch code {
	case "":
		return 0
	case api.CodeForbidden:
		return kerr.TopicAuthorizationFailed.Code
	case api.CodeUnknownMember:
		return kerr.UnknownMemberID.Code
	}
	return joinError(code)
}

// handoffInterval is the heartbeat interval handed out while a handoff
// involves the member (capped by kafka_heartbeat_interval).
const handoffInterval = 20 * time.Millisecond

// heartbeatInterval is what the member is told to wait before its next
// heartbeat: short while a handoff involves it (changed: this answer hands
// it a new assignment to act on), kafka_heartbeat_interval otherwise.
func (c *conn) heartbeatInterval(m *member, changed bool, now time.Time) int32 {
	d := c.s.cfg.HeartbeatInterval
	if changed || m.inHandoff(now) {
		d = min(d, handoffInterval)
	}
	return int32(max(d.Milliseconds(), 1))
}

// rebalanceTimeout bounds how long a held revoke waits for the member.
func (c *conn) rebalanceTimeout(millis int32) time.Duration {
	d := time.Duration(millis) * time.Millisecond
	return min(max(d, c.s.cfg.SessionTimeoutMin), c.s.cfg.SessionTimeoutMax)
}

// ownedByID turns a heartbeat's owned partitions (topic ids) into a set;
// nil Topics (a keepalive) is nil.
func (c *conn) ownedByID(topics []kmsg.ConsumerGroupHeartbeatRequestTopic) map[session.Partition]bool {
	if topics == nil {
		return nil
	}
	_, byID, _ := c.s.topics.get(c.ctx, false)
	owned := map[session.Partition]bool{}
	for _, t := range topics {
		name, ok := byID[t.TopicID]
		if !ok {
			continue
		}
		for _, p := range t.Partitions {
			owned[session.Partition{Topic: name, Partition: p}] = true
		}
	}
	return owned
}

// assignment848 renders partitions by topic id.
func (c *conn) assignment848(parts []session.Partition) *kmsg.ConsumerGroupHeartbeatResponseAssignment {
	a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
	a.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
	ctx, cancel := context.WithTimeout(c.ctx, c.s.cfg.RequestTimeout)
	defer cancel()
	topics, _, _ := c.s.topics.get(ctx, false)
	for _, p := range parts {
		ti, ok := topics[p.Topic]
		if !ok {
			if topics, _, _ = c.s.topics.get(ctx, true); topics == nil {
				continue
			}
			if ti, ok = topics[p.Topic]; !ok {
				continue
			}
		}
		if n := len(a.Topics); n == 0 || a.Topics[n-1].TopicID != ti.id {
			t := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
			t.TopicID = ti.id
			a.Topics = append(a.Topics, t)
		}
		t := &a.Topics[len(a.Topics)-1]
		t.Partitions = append(t.Partitions, p.Partition)
	}
	return &a
}

// joinError maps a refused join. A limit (this gateway's
// kafka_max_members, the coordinator's members_per_group and other join
// limits) is GROUP_MAX_SIZE_REACHED, final as Kafka's group.max.size: a
// retriable code had the client retry for ever without a word.
func joinError(code api.Code) int16 {
	switch code {
	case api.CodeForbidden, api.CodeUnauthorized, api.CodeTokenExpired, api.CodeCapabilityRevoked:
		return kerr.GroupAuthorizationFailed.Code
	case api.CodeLimitExceeded:
		return kerr.GroupMaxSizeReached.Code
	case api.CodeInconsistentAssign:
		return kerr.InconsistentGroupProtocol.Code
	case api.CodeBadRequest:
		return kerr.InvalidRequest.Code
	case api.CodeNotFound: // a topic deleted since the listener's topic list was read
		return kerr.UnknownTopicOrPartition.Code
	}
	if api.IsRetriable(code) {
		return kerr.CoordinatorNotAvailable.Code
	}
	return kerr.UnknownServerError.Code
}

// rejoin848 hands the member its whole assignment under a new epoch (it
// owns nothing at epoch 0). false when the member is gone.
func (m *member) rejoin848(now time.Time) (int32, []session.Partition, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state != memberActive {
		return 0, nil, false
	}
	m.seen(now)
	m.acked(map[session.Partition]bool{}, now)
	m.prev, m.epoch = m.epoch, m.epoch+1
	m.hand(m.target())
	return m.epoch, m.sent, true
}

// heartbeat848 answers a heartbeat: the epoch, and the assignment when it
// changed or the member's report differs from it (nil otherwise).
func (m *member) heartbeat848(epoch int32, owned map[session.Partition]bool, now time.Time) (int32, []session.Partition, int16) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.state != memberActive:
		return 0, nil, kerr.UnknownMemberID.Code
	case epoch != m.epoch && epoch != m.prev:
		return m.epoch, nil, kerr.FencedMemberEpoch.Code
	}
	m.seen(now)
	m.acked(owned, now)
	t := m.target()
	if !slices.Equal(t, m.sent) {
		m.prev, m.epoch = m.epoch, m.epoch+1
		m.hand(t)
		return m.epoch, t, 0
	}
	if owned != nil && !sameSet(owned, t) {
		return m.epoch, t, 0 // the member missed an answer: deliver it again
	}
	return m.epoch, nil, 0
}

// inHandoff reports whether the member takes part in a handoff: a revoke
// waits for it, or it joined less than a second ago (its grants come as
// soon as the partitions it gets are released).
func (m *member) inHandoff(now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.deferred) > 0 || now.Sub(m.joinedAt) < time.Second
}

func sameSet(set map[session.Partition]bool, list []session.Partition) bool {
	if len(set) != len(list) {
		return false
	}
	for _, p := range list {
		if !set[p] {
			return false
		}
	}
	return true
}
