package kafkaclients

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestMemberIDIsNoCredential: a client whose credential may join the
// same group, but which did not open a member, cannot use that member by
// naming its Kafka member id (KIP-848 clients choose their own ids; a
// classic leader learns the others'): its commit of the victim's
// partition, its OffsetFetch, its rejoin at epoch 0 under the victim's id
// (which used to replace the victim), its leave of the victim (KIP-848
// epoch -1, classic LeaveGroup) and its classic Heartbeat each answer
// UNKNOWN_MEMBER_ID, and the victim's member, epoch and committed offset
// are untouched.
func TestMemberIDIsNoCredential(t *testing.T) {
	s := Start(t, Options{Partitions: 2})
	produceDirect(t, s, "orders", 0, 10)
	produceDirect(t, s, "orders", 1, 10)
	ctx := context.Background()
	victimCred, err := s.Stack.ClientCredential(ctx, "victim", []string{"shared"}, []string{"orders"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	attackerCred, err := s.Stack.ClientCredential(ctx, "attacker", []string{"shared"}, []string{"orders"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	victim := joinRaw(t, s, victimCred, "shared", "victim-member")
	if codes := victim.commit(t, 3, map[int32]string{0: "", 1: ""}); codes[0] != 0 || codes[1] != 0 {
		t.Fatalf("the victim's own commit: %v", codes)
	}
	members := func() int { return len(s.Describe(t, "shared").Members) }
	if n := members(); n != 1 {
		t.Fatalf("%d members before the attack, want 1", n)
	}

	a := dialRaw(t, s.KafkaAddrs()[0])
	a.authenticate("OAUTHBEARER", attackerCred)
	attacker := &rawMember{r: a, group: "shared", id: "victim-member", epoch: victim.epoch}
	if codes := attacker.commit(t, 9, map[int32]string{0: "", 1: ""}); codes[0] != kerr.UnknownMemberID.Code || codes[1] != kerr.UnknownMemberID.Code {
		t.Fatalf("commit under the victim's member id: %v, want UNKNOWN_MEMBER_ID", codes)
	}
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.SetVersion(9)
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group, g.MemberID, g.MemberEpoch = "shared", kmsg.StringPtr("victim-member"), victim.epoch
	g.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: "orders", Partitions: []int32{0}}}
	fetch.Groups = []kmsg.OffsetFetchRequestGroup{g}
	if resp := a.roundTrip(fetch).(*kmsg.OffsetFetchResponse); resp.Groups[0].ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("OffsetFetch under the victim's member id: %+v, want UNKNOWN_MEMBER_ID", resp.Groups[0])
	}
	for _, epoch := range []int32{0, -1, victim.epoch} {
		hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		hb.SetVersion(1)
		hb.Group, hb.MemberID, hb.MemberEpoch, hb.RebalanceTimeoutMillis = "shared", "victim-member", epoch, 5000
		hb.SubscribedTopicNames, hb.Topics = []string{"orders"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		resp := a.roundTrip(hb).(*kmsg.ConsumerGroupHeartbeatResponse)
		if resp.ErrorCode != kerr.UnknownMemberID.Code {
			t.Fatalf("heartbeat at epoch %d under the victim's member id: error %d, want UNKNOWN_MEMBER_ID", epoch, resp.ErrorCode)
		}
	}
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.SetVersion(3)
	leave.Group = "shared"
	leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: "victim-member"}}
	if resp := a.roundTrip(leave).(*kmsg.LeaveGroupResponse); resp.ErrorCode != 0 || resp.Members[0].ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("LeaveGroup of the victim's member id: %+v, want UNKNOWN_MEMBER_ID", resp)
	}

	// The victim is untouched: still the group's one member, its epoch
	// and its commit as they were, its own heartbeat and commit work.
	if n := members(); n != 1 {
		t.Fatalf("%d members after the attack, want the victim alone", n)
	}
	for _, p := range s.Describe(t, "shared").Partitions {
		if p.Committed == nil || *p.Committed != 3 {
			t.Fatalf("orders/%d committed %v after the attack, want 3", p.Partition, p.Committed)
		}
	}
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.SetVersion(1)
	hb.Group, hb.MemberID, hb.MemberEpoch = "shared", "victim-member", victim.epoch
	if resp := victim.r.roundTrip(hb).(*kmsg.ConsumerGroupHeartbeatResponse); resp.ErrorCode != 0 {
		t.Fatalf("the victim's own heartbeat after the attack: error %d", resp.ErrorCode)
	}
	if codes := victim.commit(t, 5, map[int32]string{0: ""}); codes[0] != 0 {
		t.Fatalf("the victim's own commit after the attack: %v", codes)
	}
}
