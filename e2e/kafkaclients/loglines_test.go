package kafkaclients

import (
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestLogLinesCarryBoundedClientText is redteam19 #5: Kafka puts no
// bound below 32,767 bytes on a client.id or a topic name (kgo and
// librdkafka cap their own client.id; the protocol does not), and the
// listener logged them as sent — every member line carried its
// client.id ("kafka member joined" at info, once per join), and a
// member's refused subscription every topic it named. One tenant joining
// at join_rate (50/s) with a 32 KB client.id wrote ~1.6 MB of log a
// second, and a subscription naming a few thousand long names a line of
// megabytes per refused change. Now a client.id is logged cut to 255
// bytes and a topic list to its first 10 names, each cut to 249 bytes.
// Here a KIP-848 member with a 30,000-byte client.id joins, then changes
// its subscription to its topic and 400 names of 200 characters its
// credential may not see (refused by the coordinator): no field of any
// line the stack logs is over 4 KiB. Fails without (the join's line
// carries the whole client.id, the refusal's 80 KB of names).
func TestLogLinesCarryBoundedClientText(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	s := Start(t, Options{Partitions: 1, Observe: core})
	cred := tenantCredential(t, s, "tenant-a", []string{"a-*"})
	r := dialRaw(t, s.KafkaAddrs()[0])
	r.fmt = kmsg.NewRequestFormatter(kmsg.FormatterClientID(strings.Repeat("c", 30000)))
	if resp := r.authenticate("PLAIN", cred); resp.ErrorCode != 0 {
		t.Fatalf("SASL: %d", resp.ErrorCode)
	}
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.SetVersion(1)
	hb.Group, hb.MemberID, hb.MemberEpoch, hb.RebalanceTimeoutMillis = "a-1", "long-client", 0, 5000
	hb.SubscribedTopicNames, hb.Topics = []string{s.Topic}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	joined := r.roundTrip(hb).(*kmsg.ConsumerGroupHeartbeatResponse)
	if joined.ErrorCode != 0 {
		t.Fatalf("join: error %d %v", joined.ErrorCode, joined.ErrorMessage)
	}
	hb.MemberEpoch = joined.MemberEpoch
	hb.SubscribedTopicNames = []string{s.Topic}
	for i := range 400 {
		hb.SubscribedTopicNames = append(hb.SubscribedTopicNames, fmt.Sprintf("%03d-%s", i, strings.Repeat("h", 196)))
	}
	r.roundTrip(hb) // refused or not: its lines are the subject
	lines := 0
	for _, e := range logs.All() {
		lines++
		for _, f := range e.Context {
			if n := fieldText(f); n > 4<<10 {
				t.Errorf("%q: field %s of %d bytes", e.Message, f.Key, n)
			}
		}
	}
	if logs.FilterMessage("kafka member joined").Len() != 1 {
		t.Errorf("no \"kafka member joined\" line among %d: the test checked nothing of the member's", lines)
	}
}

// fieldText is how many bytes of text f puts in a line.
func fieldText(f zapcore.Field) int {
	enc := zapcore.NewMapObjectEncoder()
	f.AddTo(enc)
	return len(fmt.Sprint(enc.Fields[f.Key]))
}
