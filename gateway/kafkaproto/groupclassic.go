package kafkaproto

// Behavior: the classic group protocol — JoinGroup v0–v9, SyncGroup
// v0–v5, Heartbeat v0–v4, LeaveGroup v0–v5 — protocol type "consumer".
//
//   - Every member is its own round: JoinGroup answers at once (no
//     barrier across members: capgate's coordinator, not a leader
//     member, decides the assignment), with the member as a follower (the
//     leader id names no member, so no client runs its own assignor), its
//     protocol the first the client offered, and a generation of its own.
//     A new member (empty id) is joined to capgate with the connection's
//     client credential, the topics of its subscription metadata and its
//     client.id as a capgate client_id (capgateClientID: any client.id
//     Kafka allows joins, "my app" as "my_app"); an
//     id this gateway does not know answers UNKNOWN_MEMBER_ID. A known
//     member rejoining with other topics changes its capgate member's
//     subscription (member.resubscribe): the coordinator reassigns.
//   - SyncGroup answers the partitions the capgate session holds, minus
//     those whose revoke waits for the member. Heartbeat answers
//     REBALANCE_IN_PROGRESS whenever that differs from what the member was
//     last given — a grant arrived or a revoke waits — so the member
//     rejoins within one heartbeat interval.
//   - Revokes: an eager member (any protocol but cooperative-sticky) owns
//     nothing when it rejoins, which acknowledges every waiting revoke; a
//     cooperative member lists what it still owns in its subscription
//     metadata, and the partitions missing from it are acknowledged (only
//     what moves is revoked). Until the SyncGroup the member holds only
//     what it said it owns: a revoke or regrant meanwhile of anything
//     else is not held or told again for it (joinClassic). See member.go.
//   - Session timeouts outside [kafka_session_timeout_min, _max] answer
//     INVALID_SESSION_TIMEOUT. LeaveGroup releases the member's partitions
//     at its committed offsets and leaves.

import (
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client/session"
)

// leaderID names the (absent) group leader: every member is a follower.
const leaderID = "capgate"

func handleJoinGroup(c *conn, h header, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.JoinGroupRequest)
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.Generation, resp.LeaderID = -1, leaderID
	now := time.Now()
	if resp.ErrorCode = c.groupAllowed(req.Group, now); resp.ErrorCode != 0 {
		return resp, nil
	}
	protocol, meta, ok := pickProtocol(req)
	if !ok {
		resp.ErrorCode = kerr.InconsistentGroupProtocol.Code
		return resp, nil
	}
	sessionTimeout := time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	if sessionTimeout < c.s.cfg.SessionTimeoutMin || sessionTimeout > c.s.cfg.SessionTimeoutMax {
		resp.ErrorCode = kerr.InvalidSessionTimeout.Code
		return resp, nil
	}
	rebalance := req.RebalanceTimeoutMillis
	if req.Version == 0 {
		rebalance = req.SessionTimeoutMillis
	}
	m := c.s.groups.own(req.Group, req.MemberID, c.key())
	if req.MemberID != "" && (m == nil || m.kip848) {
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp, nil
	}
	if m == nil {
		m = &member{
			g: c.s.groups, group: req.Group, key: c.key(), cooperative: protocol == "cooperative-sticky",
			sessionTimeout: sessionTimeout, rebalanceTimeout: c.rebalanceTimeout(rebalance),
		}
		join := api.JoinRequest{ClientID: capgateClientID(h.clientID), Topics: meta.Topics} // the client.id as sent, cut to a name
		if req.InstanceID != nil {
			join.InstanceID = *req.InstanceID
		}
		if code, err := c.joinMember(m, join); err != nil {
			resp.ErrorCode = joinError(code)
			return resp, nil
		}
	} else if !m.subscribed(meta.Topics, "") {
		// A rejoin with another subscription (AddConsumeTopics, a
		// pattern that matched a new topic): the coordinator reassigns.
		if resp.ErrorCode = resubscribeError(m.resubscribe(c.ctx, meta.Topics, "")); resp.ErrorCode != 0 {
			return resp, nil
		}
	}
	generation, code := m.joinClassic(owned(meta, m.cooperative), now)
	resp.ErrorCode, resp.Generation, resp.MemberID = code, generation, m.id
	resp.Protocol, resp.ProtocolType = &protocol, kmsg.StringPtr("consumer")
	return resp, nil
}

// pickProtocol takes the first protocol the client offered whose
// metadata is a consumer subscription.
func pickProtocol(req *kmsg.JoinGroupRequest) (string, kmsg.ConsumerMemberMetadata, bool) {
	if req.ProtocolType != "consumer" {
		return "", kmsg.ConsumerMemberMetadata{}, false
	}
	for _, p := range req.Protocols {
		var meta kmsg.ConsumerMemberMetadata
		if meta.ReadFrom(p.Metadata) == nil && len(meta.Topics) > 0 {
			return p.Name, meta, true
		}
	}
	return "", kmsg.ConsumerMemberMetadata{}, false
}

// owned is what a rejoining member still owns: nothing for an eager one.
func owned(meta kmsg.ConsumerMemberMetadata, cooperative bool) map[session.Partition]bool {
	out := map[session.Partition]bool{}
	if !cooperative {
		return out
	}
	for _, t := range meta.OwnedPartitions {
		for _, p := range t.Partitions {
			out[session.Partition{Topic: t.Topic, Partition: p}] = true
		}
	}
	return out
}

func handleSyncGroup(c *conn, _ header, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.SyncGroupRequest)
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	m, code := c.classicMember(req.Group, req.MemberID)
	if resp.ErrorCode = code; code != 0 {
		return resp, nil
	}
	parts, code := m.syncClassic(req.Generation, time.Now())
	resp.ErrorCode = code
	if code != 0 {
		return resp, nil
	}
	assignment := kmsg.NewConsumerMemberAssignment()
	for _, p := range parts {
		if n := len(assignment.Topics); n == 0 || assignment.Topics[n-1].Topic != p.Topic {
			assignment.Topics = append(assignment.Topics, kmsg.ConsumerMemberAssignmentTopic{Topic: p.Topic})
		}
		t := &assignment.Topics[len(assignment.Topics)-1]
		t.Partitions = append(t.Partitions, p.Partition)
	}
	resp.MemberAssignment = assignment.AppendTo(nil)
	resp.ProtocolType, resp.Protocol = req.ProtocolType, req.Protocol
	return resp, nil
}

func handleHeartbeat(c *conn, _ header, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.HeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	m, code := c.classicMember(req.Group, req.MemberID)
	if resp.ErrorCode = code; code != 0 {
		return resp, nil
	}
	resp.ErrorCode = m.heartbeatClassic(req.Generation, time.Now())
	return resp, nil
}

// classicMember finds a classic member of group this connection may use.
func (c *conn) classicMember(group, id string) (*member, int16) {
	if code := c.groupAllowed(group, time.Now()); code != 0 {
		return nil, code
	}
	m := c.s.groups.own(group, id, c.key())
	if m == nil || m.kip848 {
		return nil, kerr.UnknownMemberID.Code
	}
	return m, 0
}

func handleLeaveGroup(c *conn, _ header, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.LeaveGroupRequest)
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	if resp.ErrorCode = c.groupAllowed(req.Group, time.Now()); resp.ErrorCode != 0 {
		return resp, nil
	}
	leave := func(id string) int16 {
		m := c.s.groups.own(req.Group, id, c.key())
		if m == nil {
			return kerr.UnknownMemberID.Code
		}
		m.close()
		return 0
	}
	if req.Version < 3 {
		resp.ErrorCode = leave(req.MemberID)
		return resp, nil
	}
	for _, rm := range req.Members {
		out := kmsg.NewLeaveGroupResponseMember()
		out.MemberID, out.InstanceID = rm.MemberID, rm.InstanceID
		out.ErrorCode = leave(rm.MemberID)
		resp.Members = append(resp.Members, out)
	}
	return resp, nil
}

// joinClassic starts a new generation for the member; owned acknowledges
// the revokes of what it no longer owns. Until its SyncGroup is
// answered the client holds only what it still owns (an eager client:
// nothing), so that is what a revoke or regrant arriving meanwhile finds
// it holding (m.sent): one of a partition it gave up is stepped at once,
// not held for it or told again (retell) — the SyncGroup would leave the
// partition out, the next heartbeat find the assignment it expects
// handed, and nothing but the next JoinGroup acknowledge it: the
// partition waited for the rebalance timeout (a revoke) or was never
// read again (a regrant: an administrator's offsets reset).
func (m *member) joinClassic(owned map[session.Partition]bool, now time.Time) (int32, int16) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state != memberActive {
		return -1, kerr.UnknownMemberID.Code
	}
	m.seen(now)
	m.acked(owned, now)
	m.sent = slices.DeleteFunc(slices.Clone(m.sent), func(p session.Partition) bool { return !owned[p] })
	m.prev, m.epoch = m.epoch, m.epoch+1
	m.syncing = true
	return m.epoch, 0
}

// syncClassic hands the member its assignment for generation.
func (m *member) syncClassic(generation int32, now time.Time) ([]session.Partition, int16) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.state != memberActive:
		return nil, kerr.UnknownMemberID.Code
	case generation != m.epoch:
		return nil, kerr.IllegalGeneration.Code
	}
	m.seen(now)
	m.syncing = false
	m.hand(m.target())
	return m.sent, 0
}

// heartbeatClassic keeps the member alive and asks it to rejoin when its
// assignment should change.
func (m *member) heartbeatClassic(generation int32, now time.Time) int16 {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.state != memberActive:
		return kerr.UnknownMemberID.Code
	case generation != m.epoch:
		return kerr.IllegalGeneration.Code
	}
	m.seen(now)
	if m.syncing || !slices.Equal(m.target(), m.sent) {
		return kerr.RebalanceInProgress.Code
	}
	return 0
}
