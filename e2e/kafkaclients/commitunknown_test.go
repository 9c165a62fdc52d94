package kafkaclients

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/e2e/sdk"
)

// TestCommitOfAMissingPartition: a kgo group member (classic and KIP-848)
// sends one OffsetCommit (through its client's Request) naming a
// partition it holds, a partition and a topic that do not exist, an
// existing topic it does not hold and two its credential may not see.
// As Kafka: the held partition is committed (OffsetFetch reads it back),
// the missing ones answer UNKNOWN_TOPIC_OR_PARTITION, the unheld one the
// group's ILLEGAL_GENERATION / STALE_MEMBER_EPOCH, the unseen ones
// TOPIC_AUTHORIZATION_FAILED whether they exist or not. OffsetFetch of a
// missing partition answers -1 without an error, as Kafka's v1+ does.
// Before, every refused partition answered ILLEGAL_GENERATION (the
// classic member rejoins for nothing).
func TestCommitOfAMissingPartition(t *testing.T) {
	s := Start(t, Options{Partitions: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	created, err := kadm.NewClient(directClient(t, s)).CreateTopics(ctx, 2, 1, nil, "orders-audit", "billing")
	if err == nil {
		err = created.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(2) {
		produceDirect(t, s, "orders", p, 10)
	}
	cred, err := s.Stack.ClientCredential(ctx, "e2e-missing", []string{"missing-*"}, []string{"orders*"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, proto := range []protocol{cooperativeSticky, kip848} {
		t.Run(proto.String(), func(t *testing.T) {
			group := "missing-" + proto.String()
			m := joinGroup(t, s, group, group, cred, proto, kgo.DisableAutoCommit())
			sdk.Eventually(t, 20*time.Second, "the member holds both partitions", func() (bool, string) {
				return len(m.Assigned()) == 2, fmt.Sprint(m.Assigned())
			})
			id, generation := m.cl.GroupMetadata()
			stale := kerr.IllegalGeneration
			if proto == kip848 {
				stale = kerr.StaleMemberEpoch
			}
			want := map[string]map[int32]*kerr.Error{
				"orders":       {0: nil, 7: kerr.UnknownTopicOrPartition},
				"orders-gone":  {0: kerr.UnknownTopicOrPartition},
				"orders-audit": {0: stale},
				"billing":      {0: kerr.TopicAuthorizationFailed},
				"secret":       {0: kerr.TopicAuthorizationFailed},
			}
			req := kmsg.NewPtrOffsetCommitRequest()
			req.Group, req.MemberID, req.Generation = group, id, generation
			for topic, parts := range want {
				rt := kmsg.NewOffsetCommitRequestTopic()
				rt.Topic = topic
				for p := range parts {
					rp := kmsg.NewOffsetCommitRequestTopicPartition()
					rp.Partition, rp.Offset = p, 4
					rt.Partitions = append(rt.Partitions, rp)
				}
				req.Topics = append(req.Topics, rt)
			}
			kresp, err := req.RequestWith(ctx, m.cl)
			if err != nil {
				t.Fatal(err)
			}
			answered := 0
			for _, rt := range kresp.Topics {
				for _, rp := range rt.Partitions {
					answered++
					w, wantCode := want[rt.Topic][rp.Partition], int16(0)
					if w != nil {
						wantCode = w.Code
					}
					if rp.ErrorCode != wantCode {
						t.Errorf("commit %s/%d: %v, want %v", rt.Topic, rp.Partition, kerr.ErrorForCode(rp.ErrorCode), w)
					}
				}
			}
			if answered != 6 {
				t.Fatalf("commit answered %d partitions, want 6: %+v", answered, kresp.Topics)
			}

			got := offsetFetch(ctx, t, m.cl, group, map[string][]int32{"orders": {0, 7}, "orders-gone": {0}})
			if got["orders"][0] != 4 || got["orders"][7] != -1 || got["orders-gone"][0] != -1 {
				t.Fatalf("OffsetFetch: %v, want orders/0 at 4 (committed), orders/7 and orders-gone/0 -1", got)
			}
		})
	}
}

// offsetFetch is the committed offsets of wanted through cl (OffsetFetch
// at the version kgo and the listener agree on); a partition's error fails
// the test.
func offsetFetch(ctx context.Context, t *testing.T, cl *kgo.Client, group string, wanted map[string][]int32) map[string]map[int32]int64 {
	t.Helper()
	out := map[string]map[int32]int64{}
	code := offsetFetchEach(ctx, t, cl, group, wanted, func(topic string, partition int32, p offsetPart) {
		if p.code != 0 {
			t.Fatalf("OffsetFetch %s/%d: %v, want no error", topic, partition, kerr.ErrorForCode(p.code))
		}
		if out[topic] == nil {
			out[topic] = map[int32]int64{}
		}
		out[topic][partition] = p.offset
	})
	if code != 0 {
		t.Fatalf("OffsetFetch: group error %v", kerr.ErrorForCode(code))
	}
	return out
}
