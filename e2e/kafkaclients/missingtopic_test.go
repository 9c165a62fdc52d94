package kafkaclients

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/capgate/capgate/e2e/sdk"
)

// TestKIP848MemberOfAMissingTopic: a kgo KIP-848 consumer of orders and of
// a topic not created yet ("later") consumes orders at once, as against
// Kafka (its broker assigns what exists), and later's partitions once it
// is created — kgo sends the subscription in its first heartbeat only, so
// the gateway joins the created topic itself. The gateway logs the member's
// missing topic with its group. Before, the coordinator refused the whole
// join (unknown topic) and kgo got UNKNOWN_SERVER_ERROR on every attempt:
// nothing consumed, while a classic member of the same topics consumed
// orders. A consumer of only a missing topic never joins (kgo waits for the
// topic in Metadata): the gateway logs the Metadata request's missing topic,
// where it said nothing; and a heartbeat subscribing only to missing topics
// (a client that sends it, Java's) is answered UNKNOWN_TOPIC_OR_PARTITION
// naming them (was UNKNOWN_SERVER_ERROR).
func TestKIP848MemberOfAMissingTopic(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	s := Start(t, Options{Partitions: 2, Observe: core})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cred, err := s.Stack.ClientCredential(ctx, "missing", []string{"late", "none", "raw"}, []string{"*"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	warned := func(snippet, topic, group string) (bool, string) {
		for _, e := range logs.FilterMessageSnippet(snippet).All() {
			f := e.ContextMap()
			if fmt.Sprint(f["missing_topics"]) == "["+topic+"]" && (group == "" || f["group"] == group) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("no %q line for %s in %d warnings", snippet, topic, logs.Len())
	}

	m := joinGroup(t, s, "late1", "late", cred, kip848, kgo.ConsumeTopics("orders", "later"))
	byTopic := m.byTopic
	produceDirect(t, s, "orders", 0, 2)
	sdk.Eventually(t, 30*time.Second, "orders consumed beside a missing topic", func() (bool, string) {
		return byTopic()["orders"] == 2, fmt.Sprintf("polled %v, errors %v", byTopic(), m.Errors())
	})
	sdk.Eventually(t, 10*time.Second, "the member's missing topic logged", func() (bool, string) {
		return warned("kafka member subscribes to topics Kafka does not have", "later", "late")
	})

	if _, err := kadm.NewClient(directClient(t, s)).CreateTopic(ctx, 2, 1, nil, "later"); err != nil {
		t.Fatal(err)
	}
	produceDirect(t, s, "later", 0, 3)
	produceDirect(t, s, "later", 1, 3)
	sdk.Eventually(t, 60*time.Second, "the created topic joined and consumed", func() (bool, string) {
		return byTopic()["later"] == 6, fmt.Sprintf("polled %v, errors %v", byTopic(), m.Errors())
	})

	only := joinGroup(t, s, "none1", "none", cred, kip848, kgo.ConsumeTopics("nowhere"))
	sdk.Eventually(t, 30*time.Second, "a consumer of only a missing topic logged", func() (bool, string) {
		return warned("kafka client asked for topics Kafka does not have", "nowhere", "")
	})
	if got := only.Assigned(); len(got) != 0 {
		t.Errorf("a consumer of a missing topic was assigned %v", got)
	}

	r := dialRaw(t, s.KafkaAddrs()[0])
	r.authenticate("OAUTHBEARER", cred)
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.SetVersion(1)
	hb.Group, hb.MemberID, hb.MemberEpoch, hb.RebalanceTimeoutMillis = "raw", "raw-member", 0, 5000
	hb.SubscribedTopicNames, hb.Topics = []string{"nothere"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	resp := r.roundTrip(hb).(*kmsg.ConsumerGroupHeartbeatResponse)
	msg := ""
	if resp.ErrorMessage != nil {
		msg = *resp.ErrorMessage
	}
	if resp.ErrorCode != kerr.UnknownTopicOrPartition.Code || !strings.Contains(msg, "nothere") {
		t.Errorf("a heartbeat subscribing only to a missing topic: error %d %q, want UNKNOWN_TOPIC_OR_PARTITION naming it", resp.ErrorCode, msg)
	}
	if ok, why := warned("kafka member subscribes only to topics Kafka does not have", "nothere", "raw"); !ok {
		t.Error(why)
	}
}
