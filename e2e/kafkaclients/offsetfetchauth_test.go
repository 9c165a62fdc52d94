package kafkaclients

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/capgate/capgate/e2e/sdk"
)

// TestOffsetFetchOfAnUnauthorizedTopic is the attack: two credentials
// share group a-orders, X's covering topics orders and billing, Y's only
// orders. X's member commits billing/0. Y — through its own member
// (OffsetFetch v9 and, pinned to Kafka 2.8, v7) and through a client
// without a member (kadm's all-topics FetchOffsets, the admin read) —
// asks for billing's offsets: each named billing partition answers -1
// with TOPIC_AUTHORIZATION_FAILED and the group no error, as Kafka
// answers a principal without Describe on the topic; an all-topics read
// leaves billing out; orders' committed offsets are answered as before,
// and X still reads billing/0. Before, Y read X's committed billing
// offset.
func TestOffsetFetchOfAnUnauthorizedTopic(t *testing.T) {
	s, x, y, credY := sharedGroup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if got := offsetFetch(ctx, t, x.cl, "a-orders", map[string][]int32{"billing": {0}}); got["billing"][0] != 5 {
		t.Fatalf("x reads billing/0 at %v, want its commit 5", got)
	}

	named := map[string][]int32{"orders": {0, 1}, "billing": {0, 1}}
	v7 := kgoClient(t, s.KafkaAddrs(), credY, false, kgo.ClientID("y-old"), kgo.MaxVersions(kversion.V2_8_0()))
	for name, cl := range map[string]*kgo.Client{"y's member, v9": y.cl, "a non-member of y's, v7": v7} {
		group, parts := offsetFetchParts(ctx, t, cl, "a-orders", named)
		if group != 0 {
			t.Fatalf("%s: group error %v, want none (Kafka refuses the topic, not the group)", name, kerr.ErrorForCode(group))
		}
		want := map[string]offsetPart{
			"orders/0": {3, 0}, "orders/1": {3, 0},
			"billing/0": {-1, kerr.TopicAuthorizationFailed.Code}, "billing/1": {-1, kerr.TopicAuthorizationFailed.Code},
		}
		if fmt.Sprint(parts) != fmt.Sprint(want) {
			t.Errorf("%s: OffsetFetch of orders and billing answered %v, want %v", name, parts, want)
		}
	}

	all, err := kadm.NewClient(kgoClient(t, s.KafkaAddrs(), credY, false, kgo.ClientID("lag-exporter"))).FetchOffsets(ctx, "a-orders")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := all["billing"]; ok {
		t.Errorf("y's all-topics FetchOffsets lists billing: %v", all["billing"])
	}
	for p := range int32(2) {
		if o, ok := all.Lookup("orders", p); !ok || o.Err != nil || o.At != 3 {
			t.Errorf("y's all-topics FetchOffsets orders/%d: %+v (found %v), want 3", p, o, ok)
		}
	}
}

// sharedGroup starts the deployment of the unauthorized-topic tests:
// group a-orders shared by x (a kgo member of credential tenant-x, topics
// orders and billing, consuming billing) and y (tenant-y's, topics
// orders only, consuming orders); billing/0 has 5 records, orders 3 per
// partition, and both members committed what they polled. It returns
// y's credential.
func sharedGroup(t *testing.T) (*Stack, *groupMember, *groupMember, string) {
	t.Helper()
	s := Start(t, Options{Partitions: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	created, err := kadm.NewClient(directClient(t, s)).CreateTopics(ctx, 2, 1, nil, "billing")
	if err == nil {
		err = created.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(2) {
		produceDirect(t, s, "orders", p, 3)
	}
	produceDirect(t, s, "billing", 0, 5)
	credX, err := s.Stack.ClientCredential(ctx, "tenant-x", []string{"a-*"}, []string{"orders", "billing"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	credY := tenantCredential(t, s, "tenant-y", []string{"a-*"}) // topics: orders only
	x := startMember(t, "billing", "x", "a-orders", cooperativeSticky, func(opts ...kgo.Opt) *kgo.Client {
		return kgoClient(t, s.KafkaAddrs(), credX, false, opts...)
	})
	y := joinGroup(t, s, "y", "a-orders", credY, cooperativeSticky)
	sdk.Eventually(t, 30*time.Second, "x polled billing's 5 records, y orders' 6", func() (bool, string) {
		return len(x.Records()) == 5 && len(y.Records()) == 6, fmt.Sprintf("x %d, y %d", len(x.Records()), len(y.Records()))
	})
	for _, m := range []*groupMember{x, y} {
		if err := m.cl.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return s, x, y, credY
}

// TestDescribeOfAGroupUsingAnUnauthorizedTopic: in the group of
// TestOffsetFetchOfAnUnauthorizedTopic, y's credential may not see
// billing, which x subscribes to and owns: y's ConsumerGroupDescribe and
// DescribeGroups of a-orders answer TOPIC_AUTHORIZATION_FAILED without
// the group's members (Kafka 4.0's answer, KAFKA-18813), x's describe
// both members. Before, y read that x consumes billing and which of its
// partitions x owns — topics Metadata hides from y.
func TestDescribeOfAGroupUsingAnUnauthorizedTopic(t *testing.T) {
	s, x, _, credY := sharedGroup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admY := kadm.NewClient(kgoClient(t, s.KafkaAddrs(), credY, false, kgo.ClientID("y-admin")))
	if _, err := admY.DescribeConsumerGroups(ctx, "a-orders"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("y's ConsumerGroupDescribe of a-orders: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	described, err := admY.DescribeGroups(ctx, "a-orders")
	if err == nil {
		err = described["a-orders"].Err
	}
	if d := described["a-orders"]; !errors.Is(err, kerr.TopicAuthorizationFailed) || len(d.Members) != 0 {
		t.Errorf("y's DescribeGroups of a-orders: %v, %d members; want TOPIC_AUTHORIZATION_FAILED and none", err, len(d.Members))
	}
	all, err := kadm.NewClient(x.cl).DescribeConsumerGroups(ctx, "a-orders")
	if err != nil {
		t.Fatal(err)
	}
	if g := all["a-orders"]; g.Err != nil || len(g.Members) != 2 {
		t.Errorf("x's ConsumerGroupDescribe of a-orders: %+v, want both members", g)
	}
}

// offsetPart is one partition of an OffsetFetch answer.
type offsetPart struct {
	offset int64
	code   int16
}

// offsetFetchParts sends one OffsetFetch of wanted through cl (at the
// version cl and the listener agree on) and returns the group's error
// and each partition's answer by "topic/partition".
func offsetFetchParts(ctx context.Context, t *testing.T, cl *kgo.Client, group string, wanted map[string][]int32) (int16, map[string]offsetPart) {
	t.Helper()
	out := map[string]offsetPart{}
	code := offsetFetchEach(ctx, t, cl, group, wanted, func(topic string, partition int32, p offsetPart) {
		out[fmt.Sprintf("%s/%d", topic, partition)] = p
	})
	return code, out
}

// offsetFetchEach sends one OffsetFetch of wanted through cl, calls each
// for every partition answered (v8+: in the group's answer) and returns
// the group's error.
func offsetFetchEach(ctx context.Context, t *testing.T, cl *kgo.Client, group string, wanted map[string][]int32, each func(topic string, partition int32, p offsetPart)) int16 {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = group
	for topic, parts := range wanted {
		req.Topics = append(req.Topics, kmsg.OffsetFetchRequestTopic{Topic: topic, Partitions: parts})
		g.Topics = append(g.Topics, kmsg.OffsetFetchRequestGroupTopic{Topic: topic, Partitions: parts})
	}
	req.Groups = []kmsg.OffsetFetchRequestGroup{g}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	code := resp.ErrorCode
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			each(rt.Topic, rp.Partition, offsetPart{rp.Offset, rp.ErrorCode})
		}
	}
	for _, rg := range resp.Groups {
		code = rg.ErrorCode
		for _, rt := range rg.Topics {
			for _, rp := range rt.Partitions {
				each(rt.Topic, rp.Partition, offsetPart{rp.Offset, rp.ErrorCode})
			}
		}
	}
	return code
}
