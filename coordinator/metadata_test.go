package coordinator_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// kafkaAdmin is a raw franz-go client for changing the embedded cluster.
func kafkaAdmin(t *testing.T, e *env) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.kafka.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func createTopic(t *testing.T, cl *kgo.Client, topic string, partitions int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, 1
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create topic %s: %v %+v", topic, err, resp)
	}
}

func growTopic(t *testing.T, cl *kgo.Client, topic string, partitions int32) {
	t.Helper()
	req := kmsg.NewPtrCreatePartitionsRequest()
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = topic, partitions
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 5000
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("grow topic %s: %v %+v", topic, err, resp)
	}
}

// TestTopicMetadata: a topic created after a pattern member joined, and
// partitions added to it later, reach the member through the metadata
// poller and the machine's reassignment.
func TestTopicMetadata(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	h := e.start(t)
	cl := kafkaAdmin(t, e)
	creds := h.clientCredential(t, []string{"g"}, []string{"*"})
	m := h.join(t, "g", creds, api.JoinRequest{TopicPattern: "events-.*"})
	if len(m.grants) != 0 {
		t.Fatalf("grants before the topic exists: %+v", m.grants)
	}
	waitGrants := func(n int) {
		eventually(t, func() string {
			m.heartbeat(t, 100)
			m.mu.Lock()
			defer m.mu.Unlock()
			if len(m.grants) != n {
				return fmt.Sprintf("%d grants, want %d", len(m.grants), n)
			}
			return ""
		})
	}
	createTopic(t, cl, "events-a", 2)
	waitGrants(2)
	growTopic(t, cl, "events-a", 4)
	waitGrants(4)
	if _, ok := m.grant("events-a", 3); !ok {
		t.Fatalf("no grant for the new partition: %+v", m.grants)
	}
}

// TestMirrorOffsets: with mirror_offsets, committed offsets appear in
// Kafka's own group offsets (under the default prefix: capgate.g); and
// describe reports lag from Kafka.
func TestMirrorOffsets(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 2})
	e.cfg.MirrorOffsets = true
	h := e.start(t)
	cl := kafkaAdmin(t, e)
	for i := range 5 {
		rec := &kgo.Record{Topic: "orders", Partition: 1, Value: []byte(fmt.Sprint(i))}
		if _, err := e.broker.Produce(context.Background(), "orders", 1, []*kgo.Record{rec}); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	creds := h.clientCredential(t, []string{"g"}, []string{"orders"})
	m := h.join(t, "g", creds, api.JoinRequest{Topics: []string{"orders"}})
	if g, _ := m.grant("orders", 1); g.Offset != 0 {
		t.Fatalf("grant start offset %d, want earliest 0", g.Offset)
	}
	if status, b := m.commit(t, "orders", 1, 2, false); status != 200 {
		t.Fatalf("commit: %d %s", status, b)
	}
	eventually(t, func() string {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Group = coordinator.DefaultMirrorOffsetsPrefix + "g"
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = "orders", []int32{1}
		req.Topics = append(req.Topics, rt)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || len(resp.Topics) == 0 || len(resp.Topics[0].Partitions) == 0 {
			return fmt.Sprintf("offset fetch: %v", err)
		}
		if got := resp.Topics[0].Partitions[0].Offset; got != 2 {
			return fmt.Sprintf("kafka has offset %d, want 2", got)
		}
		return ""
	})
	for _, p := range h.describe(t, "g").Partitions {
		if p.Partition == 1 && (p.LatestOffset == nil || *p.LatestOffset != 5 || p.Lag == nil || *p.Lag != 3) {
			t.Fatalf("partition 1: %+v, want latest 5 and lag 3", p)
		}
	}
}

// TestJoinSaysHowManyTopicsItsPatternMatches: a topic_pattern join's
// answer counts the topics the pattern matches — the whole name, internal
// topics never — so a pattern matching nothing is not silent ('^ord'
// meant as a prefix matches nothing: the member waited with no partition
// and nothing said why). A topics join carries no count.
func TestJoinSaysHowManyTopicsItsPatternMatches(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 2, "orders-eu": 1, "__consumer_offsets": 3})
	h := e.start(t)
	creds := h.clientCredential(t, []string{"*"}, []string{"*"})
	for i, tc := range []struct {
		pattern string
		want    int
	}{{"^ord", 0}, {"ord", 0}, {"orders.*", 2}, {"orders", 1}, {".*", 2}, {"events-.*", 0}} {
		var got api.JoinResponse
		h.call(t, "POST", fmt.Sprintf("/v1/groups/p%d/join", i), creds, api.JoinRequest{TopicPattern: tc.pattern}, 200, &got)
		if got.TopicPatternMatches == nil || *got.TopicPatternMatches != tc.want {
			t.Errorf("topic_pattern %q: topic_pattern_matches %v, want %d", tc.pattern, got.TopicPatternMatches, tc.want)
		}
		// The group's describe counts its pattern member's matches the
		// same way (newuser5 #19: Stable, 0 partitions, no word on why).
		var d coordinator.GroupDescription
		h.call(t, "GET", fmt.Sprintf("/v1/admin/groups/p%d", i), e.adminToken, nil, 200, &d)
		if len(d.Members) != 1 || d.Members[0].TopicPatternMatches == nil || *d.Members[0].TopicPatternMatches != tc.want {
			t.Errorf("topic_pattern %q: the describe's members %+v, want topic_pattern_matches %d", tc.pattern, d.Members, tc.want)
		}
	}
	var got api.JoinResponse
	h.call(t, "POST", "/v1/groups/t/join", creds, api.JoinRequest{Topics: []string{"orders"}}, 200, &got)
	if got.TopicPatternMatches != nil {
		t.Errorf("a topics join: topic_pattern_matches %d, want none", *got.TopicPatternMatches)
	}
	var d coordinator.GroupDescription
	h.call(t, "GET", "/v1/admin/groups/t", e.adminToken, nil, 200, &d)
	if len(d.Members) != 1 || d.Members[0].TopicPatternMatches != nil {
		t.Errorf("a topics member's describe: %+v, want no topic_pattern_matches", d.Members)
	}
}
