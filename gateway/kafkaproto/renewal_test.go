package kafkaproto

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client/session"
	"github.com/capgate/capgate/ocap"
)

// A member bound to its old credential (a capgate client credential is
// bound by its jti) cannot be carried over to the client's renewed one:
// it is renewed as a new capgate member — its partitions released at the
// client's committed offsets, a leave, a join with the new credential.
// To the Kafka client that is a KIP-368 re-authentication, which changes
// nothing in its group: the partitions granted back to the new member at
// the offsets released stay its own, unannounced, with its fetch
// positions. Before, the release took them out of the client's
// assignment at once: its commits in the window were refused
// (ILLEGAL_GENERATION), it was told to rejoin, and it read again from
// the released offsets — KafkaJS 1–2 records a renewal
// (TestKafkaJSRenewsCapgateCredentials). These tests play the
// coordinator (refence_test.go's scriptedCoordinator).

// TestRenewalKeepsTheClientsAssignment: the new member is granted both
// partitions back at the offsets released; the client is never told to
// give them up, its fetches meanwhile are answered as renewing (empty,
// throttled), and its commit made during the renewal waits for the new
// member and is committed by it.
func TestRenewalKeepsTheClientsAssignment(t *testing.T) {
	c, m := startScriptedMember(t)
	j := renewedMember(t, c, m)
	clientKeeps(t, m, "during the renewal")
	if token, renewing := m.capability(refenceP0); token != "" || !renewing {
		t.Fatalf("during the renewal the client's fetch is admitted with %q (renewing %v), want none: renewing", token, renewing)
	}
	committed := commitInBackground(m, refenceP0, 7)
	select {
	case code := <-committed:
		t.Fatalf("a commit during the renewal was answered %q before the new member held the partition", code)
	default:
	}
	j.reply(t, api.JoinResponse{MemberID: "cg-2", MemberToken: "member-token-2", SessionTimeoutMs: 60_000, HeartbeatWaitMs: 10_000,
		Grants: []api.Grant{grantAt(2, refenceP0, 5), grantAt(2, refenceP1, 0)}})
	if code := <-committed; code != "" {
		t.Fatalf("the commit made during the renewal was answered %q, want committed by the new member", code)
	}
	clientKeeps(t, m, "after the renewal")
	m.mu.Lock()
	defer m.mu.Unlock()
	if info, _ := m.sess.Inspect(refenceP0); info.Epoch != 2 || info.Committed != 7 {
		t.Errorf("p0: epoch %d committed %d, want the new member's epoch 2 and the client's 7", info.Epoch, info.Committed)
	}
	if m.renewing != nil {
		t.Errorf("still renewing %v", m.renewing)
	}
}

// TestRenewalGrantedBackAtAnotherOffsetIsToldAgain: a partition the new
// member gets back at another offset than the one released (another
// member held and committed it meanwhile) is no longer where the
// client's position says: the client is told to give it up, its commit
// from the old position is refused as not the member's, and once it
// acknowledged it gets the partition again (and reads from the
// committed offset). The other partition stays.
func TestRenewalGrantedBackAtAnotherOffsetIsToldAgain(t *testing.T) {
	c, m := startScriptedMember(t)
	j := renewedMember(t, c, m)
	committed := commitInBackground(m, refenceP0, 7)
	j.reply(t, api.JoinResponse{MemberID: "cg-2", MemberToken: "member-token-2", SessionTimeoutMs: 60_000, HeartbeatWaitMs: 10_000,
		Grants: []api.Grant{grantAt(3, refenceP0, 9), grantAt(2, refenceP1, 0)}})
	if code := <-committed; code != api.CodeStaleEpoch {
		t.Fatalf("the commit from the old position was answered %q, want %q", code, api.CodeStaleEpoch)
	}
	if gone := toldToGiveUp(t, m); !slices.Equal(gone, []session.Partition{refenceP0}) {
		t.Fatalf("the client was told to give up %v, want %v alone", gone, refenceP0)
	}
	m.mu.Lock()
	epoch := m.epoch
	m.mu.Unlock()
	_, assignment, code := m.heartbeat848(epoch, map[session.Partition]bool{refenceP1: true}, time.Now())
	if code != 0 || !slices.Equal(assignment, []session.Partition{refenceP0, refenceP1}) {
		t.Fatalf("after the client gave p0 up it was assigned %v (error %d), want both again", assignment, code)
	}
}

// TestRenewalNotGrantedBackIsTold: a partition the new member is not
// granted back within the rebalance timeout (the group gave it to
// another member) leaves the client's assignment.
func TestRenewalNotGrantedBackIsTold(t *testing.T) {
	c, m := startScriptedMember(t)
	m.mu.Lock()
	m.rebalanceTimeout = 200 * time.Millisecond
	m.mu.Unlock()
	j := renewedMember(t, c, m)
	j.reply(t, api.JoinResponse{MemberID: "cg-2", MemberToken: "member-token-2", SessionTimeoutMs: 60_000, HeartbeatWaitMs: 10_000,
		Grants: []api.Grant{grantAt(2, refenceP1, 0)}})
	deadline := time.Now().Add(10 * time.Second)
	for {
		gone := toldToGiveUp(t, m)
		if slices.Equal(gone, []session.Partition{refenceP0}) {
			return
		}
		if len(gone) > 0 || time.Now().After(deadline) {
			t.Fatalf("the client was told to give up %v, want %v alone once the rebalance timeout passed", gone, refenceP0)
		}
		time.Sleep(20 * time.Millisecond) // poll
	}
}

// TestRenewalsOwnRevokeIsNotHeldForTheClient: the renewal's release of
// a partition the member owns makes the coordinator move it (giveUp),
// which queues its revoke to the releasing member itself, and the
// heartbeat held meanwhile brings it while the renewal runs. That revoke
// is the renewal's own: the partition is released already and comes
// back to the new member. Before, the listener held it for the client
// (the partition was in its assignment), which took the partition out of
// what the client should own: a heartbeat in that window was answered
// REBALANCE_IN_PROGRESS (classic) or took the partition away (KIP-848)
// — KafkaJS rejoined at 3 in 40 renewals (TestKafkaJSRenewedManyTimes).
// Here the coordinator holds the leave so the window stays open.
func TestRenewalsOwnRevokeIsNotHeldForTheClient(t *testing.T) {
	c, m := startScriptedMember(t)
	c.mu.Lock()
	c.leaves = true
	c.mu.Unlock()
	if code := <-commitInBackground(m, refenceP0, 5); code != "" {
		t.Fatalf("commit: %q", code)
	}
	h := c.next(t, "heartbeat")
	done := carryOverTo(m, "credential-2")
	c.next(t, "join").reply(t, api.ErrorBody{Error: api.Error{Code: api.CodeUnknownMember, Message: "bound to another credential"}})
	<-done
	leave := c.next(t, "leave") // sent once both partitions were released
	if r := c.releasesOf(); !slices.Equal(r, []session.Partition{refenceP0, refenceP1}) {
		t.Fatalf("the renewal released %v before it left, want both partitions", r)
	}
	h.reply(t, fence(1, refenceP0, refenceP1)) // the coordinator's revokes of what the member released
	c.next(t, "heartbeat")                     // the answer was stepped
	clientKeeps(t, m, "after the revokes of the renewal's own releases")
	leave.reply(t, struct{}{})
	j := c.next(t, "join")
	if j.bearer != "credential-2" {
		t.Fatalf("the renewal joined with %q, want credential-2", j.bearer)
	}
	clientKeeps(t, m, "while the new member joins")
	j.reply(t, api.JoinResponse{MemberID: "cg-2", MemberToken: "member-token-2", SessionTimeoutMs: 60_000, HeartbeatWaitMs: 10_000,
		Grants: []api.Grant{grantAt(2, refenceP0, 5), grantAt(2, refenceP1, 0)}})
	c.next(t, "heartbeat")
	clientKeeps(t, m, "after the renewal")
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.renewing != nil || len(m.deferred) != 0 {
		t.Errorf("after the renewal: renewing %v, revokes held %v; want neither", m.renewing, m.deferred)
	}
}

// TestOffsetFetchDuringARenewalIsRetried: a Kafka client's OffsetFetch
// while its member is renewed (its capgate member left, the new one not
// yet joined: KafkaJS fetches offsets after every rebalance, which in a
// group of several members a renewal brings) reads the coordinator's
// committed offsets with the old member token, which the coordinator no
// longer knows. The Kafka member is alive: the answer is retriable
// (COORDINATOR_LOAD_IN_PROGRESS). Before, UNKNOWN_MEMBER_ID — on which
// KafkaJS and kgo drop their member id and join as a new member beside
// the live one, until its session timeout: two members of one client,
// another rebalance (2 KafkaJS members, 4 s credentials: 3 such joins in
// 40 s).
func TestOffsetFetchDuringARenewalIsRetried(t *testing.T) {
	c, m := startScriptedMember(t)
	g := m.g
	g.mu.Lock()
	g.byID[memberRef{m.group, m.id}] = m
	g.byKey[m.key] = []*member{m}
	g.keys = map[*member][]clientKey{m: {m.key}}
	g.mu.Unlock()
	renewedMember(t, c, m) // the new member's join waits
	c.mu.Lock()
	c.offsetsGone = true
	c.mu.Unlock()
	client := &conn{s: g.s, principal: &Principal{Claims: &ocap.Claims{}}}
	if client.key() != m.key {
		t.Fatalf("the test's connection has key %+v, the member %+v", client.key(), m.key)
	}
	id := m.id
	f := &offsetFetch{ctx: context.Background(), left: 100}
	read := func() kmsg.OffsetFetchResponseGroup {
		out := kmsg.NewOffsetFetchResponseGroup()
		out.Group = m.group
		return client.memberGroupOffsets(f, out, &id, false, map[string][]int32{"t": {0, 1}})
	}
	out := read()
	if out.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("OffsetFetch during the renewal answered %d (%v), want COORDINATOR_LOAD_IN_PROGRESS: the Kafka member is alive",
			out.ErrorCode, kerr.ErrorForCode(out.ErrorCode))
	}
	m.mu.Lock()
	m.closeLocked(time.Now())
	m.mu.Unlock()
	if out := read(); out.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("OffsetFetch of a member closing answered %d, want UNKNOWN_MEMBER_ID", out.ErrorCode)
	}
}

// renewedMember has the client commit offset 5 of p0, re-authenticate
// with credential-2, the coordinator refuse the carry-over's rejoin
// (unknown_member: bound to credential-1), and returns the renewal's
// join of a new member with credential-2, unanswered.
func renewedMember(t *testing.T, c *scriptedCoordinator, m *member) *coordinatorCall {
	t.Helper()
	if code := <-commitInBackground(m, refenceP0, 5); code != "" {
		t.Fatalf("commit: %q", code)
	}
	c.next(t, "heartbeat") // held until the member leaves
	done := carryOverTo(m, "credential-2")
	c.next(t, "join").reply(t, api.ErrorBody{Error: api.Error{Code: api.CodeUnknownMember, Message: "bound to another credential"}})
	<-done
	j := c.next(t, "join")
	var join api.JoinRequest
	if json.Unmarshal(j.body, &join) != nil || join.MemberID != "" || j.bearer != "credential-2" {
		t.Fatalf("the renewal sent %s with bearer %q, want a new member's join with credential-2", j.body, j.bearer)
	}
	return j
}

// commitInBackground is the client's OffsetCommit of offset on p under
// the member's current epoch.
func commitInBackground(m *member, p session.Partition, offset int64) <-chan api.Code {
	return commitAt(m, m.currentEpoch(), p, offset)
}

// commitAt is the client's OffsetCommit of offset on p under member
// epoch (classic: generation) epoch.
func commitAt(m *member, epoch int32, p session.Partition, offset int64) <-chan api.Code {
	out := make(chan api.Code, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		codes, _ := m.commit(ctx, epoch, map[session.Partition]int64{p: offset}, nil)
		out <- codes[p]
	}()
	return out
}

func grantAt(epoch uint64, p session.Partition, offset int64) api.Grant {
	g := grants(epoch, p).Grants[0]
	g.Offset = offset
	return g
}
