package kafkaclients

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/e2e/sdk"
	"github.com/capgate/capgate/gateway/kafkaproto"
)

// rawMember is a KIP-848 member driven by hand over a raw connection.
type rawMember struct {
	r     *rawConn
	group string
	id    string
	epoch int32
}

func joinRaw(t *testing.T, s *Stack, cred, group, id string) *rawMember {
	t.Helper()
	r := dialRaw(t, s.KafkaAddrs()[0])
	r.authenticate("OAUTHBEARER", cred)
	m := &rawMember{r: r, group: group, id: id}
	sdk.Eventually(t, 15*time.Second, id+" assigned partitions", func() (bool, string) {
		hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		hb.SetVersion(1)
		hb.Group, hb.MemberID, hb.MemberEpoch, hb.RebalanceTimeoutMillis = group, id, m.epoch, 5000
		hb.SubscribedTopicNames, hb.Topics = []string{"orders"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		resp := r.roundTrip(hb).(*kmsg.ConsumerGroupHeartbeatResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("%s heartbeat: error %d", id, resp.ErrorCode)
		}
		m.epoch = resp.MemberEpoch
		return resp.Assignment != nil && len(resp.Assignment.Topics) == 1 && len(resp.Assignment.Topics[0].Partitions) > 0, "no assignment yet"
	})
	return m
}

// commit commits offset with metadata on each partition; the error codes.
func (m *rawMember) commit(t *testing.T, offset int64, metadata map[int32]string) map[int32]int16 {
	t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.SetVersion(9)
	req.Group, req.MemberID, req.Generation = m.group, m.id, m.epoch
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "orders"
	for p, md := range metadata {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.Metadata = p, offset, kmsg.StringPtr(md)
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = []kmsg.OffsetCommitRequestTopic{rt}
	codes := map[int32]int16{}
	for _, p := range m.r.roundTrip(req).(*kmsg.OffsetCommitResponse).Topics[0].Partitions {
		codes[p.Partition] = p.ErrorCode
	}
	return codes
}

type fetched struct {
	offset   int64
	metadata string
}

// offsets is OffsetFetch v9 of partitions for the member.
func (m *rawMember) offsets(t *testing.T, partitions ...int32) map[int32]fetched {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.SetVersion(9)
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group, g.MemberID, g.MemberEpoch = m.group, kmsg.StringPtr(m.id), m.epoch
	g.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: "orders", Partitions: partitions}}
	req.Groups = []kmsg.OffsetFetchRequestGroup{g}
	resp := m.r.roundTrip(req).(*kmsg.OffsetFetchResponse)
	if resp.Groups[0].ErrorCode != 0 {
		t.Fatalf("OffsetFetch: group error %d", resp.Groups[0].ErrorCode)
	}
	out := map[int32]fetched{}
	for _, p := range resp.Groups[0].Topics[0].Partitions {
		if p.LeaderEpoch != -1 {
			// No OffsetForLeaderEpoch is offered: a committed epoch would
			// make a client validate against an API we do not serve.
			t.Fatalf("OffsetFetch orders/%d: leader epoch %d, want -1", p.Partition, p.LeaderEpoch)
		}
		out[p.Partition] = fetched{offset: p.Offset, metadata: *p.Metadata}
	}
	return out
}

// TestCommitMetadataKept: the metadata a Kafka client commits with an
// offset is kept by capgate's coordinator and answered by OffsetFetch —
// to the member that committed it and, after it left, to the next holder
// of the partition; metadata beyond 4 KiB answers
// OFFSET_METADATA_TOO_LARGE for that partition only, which is not
// committed.
func TestCommitMetadataKept(t *testing.T) {
	s := Start(t, Options{Partitions: 2})
	produceDirect(t, s, "orders", 0, 10)
	produceDirect(t, s, "orders", 1, 10)
	cred := s.ClientCredential(t, "md")

	a := joinRaw(t, s, cred, "md", "member-a")
	codes := a.commit(t, 5, map[int32]string{0: "ckpt-5", 1: strings.Repeat("x", kafkaproto.MaxCommitMetadataBytes+1)})
	if codes[0] != 0 || codes[1] != kerr.OffsetMetadataTooLarge.Code {
		t.Fatalf("commit: errors %v, want orders/0 accepted, orders/1 OFFSET_METADATA_TOO_LARGE", codes)
	}
	if got := a.offsets(t, 0, 1); got[0] != (fetched{5, "ckpt-5"}) || got[1] != (fetched{-1, ""}) {
		t.Fatalf("OffsetFetch by the committer: %+v, want orders/0 at 5 with ckpt-5, orders/1 -1 (not committed: the client's reset policy applies)", got)
	}
	for _, p := range s.Describe(t, "md").Partitions {
		if p.Partition == 0 && (p.Committed == nil || *p.Committed != 5 || p.Metadata != "ckpt-5") {
			t.Fatalf("capgate's orders/0: committed %v metadata %q, want 5 and ckpt-5", p.Committed, p.Metadata)
		}
	}

	leave := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	leave.SetVersion(1)
	leave.Group, leave.MemberID, leave.MemberEpoch = "md", "member-a", -1
	a.r.roundTrip(leave)
	b := joinRaw(t, s, cred, "md", "member-b")
	sdk.Eventually(t, 15*time.Second, "member-b holds orders/0 and sees a's commit with its metadata", func() (bool, string) {
		got := b.offsets(t, 0)[0]
		return got == fetched{5, "ckpt-5"}, fmt.Sprintf("got %+v", got)
	})

	// The coordinator goes away: an offset only it knows is not answered
	// as "none" (-1 would make the client apply its reset policy) but with
	// a retriable group error; a held partition's is still answered.
	if err := s.Coordinator().Stop(); err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrOffsetFetchRequest()
	req.SetVersion(9)
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group, g.MemberID, g.MemberEpoch = "md", kmsg.StringPtr("member-b"), b.epoch
	g.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: "orders", Partitions: []int32{0, 7}}}
	req.Groups = []kmsg.OffsetFetchRequestGroup{g}
	if resp := b.r.roundTrip(req).(*kmsg.OffsetFetchResponse); resp.Groups[0].ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("OffsetFetch of a partition not held with the coordinator down: %+v, want COORDINATOR_LOAD_IN_PROGRESS", resp.Groups[0])
	}
	if got := b.offsets(t, 0); got[0].offset != 5 {
		t.Fatalf("OffsetFetch of a held partition with the coordinator down: %+v, want 5", got)
	}
	// Back, so the member leaves at cleanup without waiting out a timeout.
	if err := s.Coordinator().Start(context.Background()); err != nil {
		t.Fatal(err)
	}
}
