package kafkaclients

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDeniedOwnCapabilityIsFinal: the capability an assign-mode
// connection authenticated with, denied while the connection lives on
// (its SASL session lasts until the token's exp), is refused with
// TOPIC_AUTHORIZATION_FAILED — final: kgo returns it from PollFetches —
// not NOT_LEADER_OR_FOLLOWER, which kgo retried silently until the
// capability's session ended (up to max_lease). Its Produce and
// ListOffsets answer the same. (A group member's fenced capability stays
// NOT_LEADER_OR_FOLLOWER: its new assignment is on its way.)
func TestDeniedOwnCapabilityIsFinal(t *testing.T) {
	s := Start(t, Options{Partitions: 2})
	produceDirect(t, s, "orders", 1, 2)
	grant := s.Grant(t, "orders", 1, []string{"fetch", "produce"}, 5*time.Minute)
	cl := kgoClient(t, s.KafkaAddrs(), grant.Capability, false,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"orders": {1: kgo.NewOffset().AtStart()}}))
	pollN(t, cl, 2)
	probe := dialRaw(t, s.KafkaAddrs()[0])
	if resp := probe.authenticate("PLAIN", grant.Capability); resp.ErrorCode != 0 {
		t.Fatalf("authenticate: %d", resp.ErrorCode)
	}

	s.Deny(t, grant.JTI)
	produceDirect(t, s, "orders", 1, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var errs []error
	for ctx.Err() == nil && (len(errs) == 0 || !errors.Is(errs[len(errs)-1], kerr.TopicAuthorizationFailed)) {
		fs := cl.PollFetches(ctx)
		if n := len(fs.Records()); n > 0 {
			t.Fatalf("%d records fetched with a denied capability", n)
		}
		fs.EachError(func(_ string, _ int32, err error) { errs = append(errs, err) })
	}
	if len(errs) == 0 || !errors.Is(errs[len(errs)-1], kerr.TopicAuthorizationFailed) {
		t.Fatalf("the kgo consumer of a denied capability never got TOPIC_AUTHORIZATION_FAILED; its errors: %v", errs)
	}
	if code := probe.roundTrip(produceRecord("orders", 1, "x", 1000)).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("Produce with a denied capability: error %d, want TOPIC_AUTHORIZATION_FAILED", code)
	}
	if code := probe.roundTrip(listLatest("orders", 1)).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("ListOffsets with a denied capability: error %d, want TOPIC_AUTHORIZATION_FAILED", code)
	}
}
