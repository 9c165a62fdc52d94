package kafkaclients

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/e2e/sdk"
)

// TestGroupCommitsThroughCapgate drives a KIP-848 member by hand: its
// OffsetCommit of a partition it holds goes through capgate (and comes
// back from OffsetFetch); one of a partition that does not exist answers
// UNKNOWN_TOPIC_OR_PARTITION (TestCommitOfAMissingPartition: one it does
// not hold STALE_MEMBER_EPOCH), an unknown member UNKNOWN_MEMBER_ID; a capability
// connection may not take part in groups at all; leaving ends the member's
// session on the gateway.
func TestGroupCommitsThroughCapgate(t *testing.T) {
	s := Start(t, Options{Partitions: 4})
	produceDirect(t, s, "orders", 0, 10)
	cred := s.ClientCredential(t, "ce")
	r := dialRaw(t, s.KafkaAddrs()[0])
	r.authenticate("OAUTHBEARER", cred)

	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.SetVersion(1)
	hb.Group, hb.MemberID, hb.MemberEpoch, hb.RebalanceTimeoutMillis = "ce", "raw-member", 0, 5000
	hb.SubscribedTopicNames, hb.Topics = []string{"orders"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	joined := r.roundTrip(hb).(*kmsg.ConsumerGroupHeartbeatResponse)
	if joined.ErrorCode != 0 || joined.MemberEpoch != 1 || joined.Assignment == nil || len(joined.Assignment.Topics) != 1 ||
		len(joined.Assignment.Topics[0].Partitions) != 4 {
		t.Fatalf("join: %+v", joined)
	}

	commit := func(member string, partitions ...int32) []int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.SetVersion(9)
		req.Group, req.MemberID, req.Generation = "ce", member, joined.MemberEpoch
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "orders"
		for _, p := range partitions {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = p, 5
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = []kmsg.OffsetCommitRequestTopic{rt}
		var codes []int16
		for _, p := range r.roundTrip(req).(*kmsg.OffsetCommitResponse).Topics[0].Partitions {
			codes = append(codes, p.ErrorCode)
		}
		return codes
	}
	if got := commit("raw-member", 0); got[0] != 0 {
		t.Fatalf("commit of a held partition: error %d", got[0])
	}
	if got := commit("raw-member", 1); got[0] != kerr.OffsetOutOfRange.Code {
		t.Fatalf("commit beyond the log end: error %d, want OFFSET_OUT_OF_RANGE", got[0])
	}
	if got := commit("raw-member", 9); got[0] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("commit of a partition that does not exist: error %d, want UNKNOWN_TOPIC_OR_PARTITION", got[0])
	}
	if got := commit("nobody", 0); got[0] != kerr.UnknownMemberID.Code {
		t.Fatalf("commit by an unknown member: error %d, want UNKNOWN_MEMBER_ID", got[0])
	}
	d := s.Describe(t, "ce")
	for _, p := range d.Partitions {
		if p.Partition == 0 && (p.Committed == nil || *p.Committed != 5) {
			t.Fatalf("capgate's committed offset of orders/0: %v, want 5", p.Committed)
		}
	}

	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.SetVersion(9)
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group, g.MemberID, g.MemberEpoch = "ce", kmsg.StringPtr("raw-member"), joined.MemberEpoch
	g.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: "orders", Partitions: []int32{0, 1}}}
	fetch.Groups = []kmsg.OffsetFetchRequestGroup{g}
	got := map[int32]int64{}
	for _, p := range r.roundTrip(fetch).(*kmsg.OffsetFetchResponse).Groups[0].Topics[0].Partitions {
		got[p.Partition] = p.Offset
	}
	if got[0] != 5 || got[1] > 0 {
		t.Fatalf("OffsetFetch: %v, want orders/0 at 5, orders/1 not committed", got)
	}

	grant := s.Grant(t, "orders", 0, []string{"fetch"}, time.Minute)
	c := dialRaw(t, s.KafkaAddrs()[0])
	c.authenticate("PLAIN", grant.Capability)
	if resp := c.roundTrip(hb).(*kmsg.ConsumerGroupHeartbeatResponse); resp.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("a capability joining a group: error %d, want GROUP_AUTHORIZATION_FAILED", resp.ErrorCode)
	}

	leave := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	leave.SetVersion(1)
	leave.Group, leave.MemberID, leave.MemberEpoch = "ce", "raw-member", -1
	r.roundTrip(leave)
	sdk.Eventually(t, 10*time.Second, "the member's session ended on the gateway", func() (bool, string) {
		m := metrics(t, s)
		return strings.Contains(m, "capgate_gateway_kafka_members 0\n"), fmt.Sprint(grep(m, "capgate_gateway_kafka_members"))
	})
}
