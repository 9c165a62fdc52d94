package kafkaclients

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestMemberJoinsHoldBoundedText is listener14's attack on what a KIP-848
// join leaves in the gateway for the member's life: ConsumerGroupHeartbeat
// is a flexible request, so its strings are compact — any length up to
// the frame (kafka_max_request_bytes, 8 MiB), not Kafka's 32,767 — and
// the listener kept two of them unchecked: the client's own member id
// (KIP-1082 ids are 22-character UUIDs; the coordinator never sees it)
// and the names of subscribed topics Kafka does not have (awaited until
// created; the coordinator checks only the ones it is sent). Here one
// credential's 8 joins, each a member id of 4 MB, then 8 joins each
// subscribing to the topic and 120 missing names of 32,002 characters,
// held ~32 MB each way — at the defaults a tenant's 2,500 members ~10 GB.
// Now a member id longer than 255 bytes is INVALID_REQUEST, a missing
// name that is no Kafka topic name INVALID_TOPIC_EXCEPTION (it can never
// be created), and more than 1,000 missing names INVALID_REQUEST, each
// holding nothing. Fails without (the heap ~32 MB larger, the joins
// answered 0).
func TestMemberJoinsHoldBoundedText(t *testing.T) {
	s := Start(t, Options{Partitions: 1})
	cred, err := s.Stack.ClientCredential(context.Background(), "tenant-a", []string{"a-*"}, []string{s.Topic, "a-*"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c := dialAuthenticatedRaw(t, s, cred)
	join := func(group, id string, topics []string) *kmsg.ConsumerGroupHeartbeatResponse {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis = group, id, 0, 5000
		req.SubscribedTopicNames = topics
		return c.roundTrip(req).(*kmsg.ConsumerGroupHeartbeatResponse)
	}
	random := func(n int) string {
		b := make([]byte, n/2)
		rand.Read(b)
		return hex.EncodeToString(b)
	}
	before := heapInUse()
	for i := range 8 {
		resp := join(fmt.Sprintf("a-long-id-%d", i), random(4<<20), []string{s.Topic})
		if resp.ErrorCode != kerr.InvalidRequest.Code {
			t.Errorf("a join with a member id of 4 MB: error %d, want INVALID_REQUEST (%d)", resp.ErrorCode, kerr.InvalidRequest.Code)
		}
	}
	for i := range 8 {
		topics := []string{s.Topic}
		for range 120 {
			topics = append(topics, "a-"+random(32000))
		}
		resp := join(fmt.Sprintf("a-long-topics-%d", i), "", topics)
		if resp.ErrorCode != kerr.InvalidTopicException.Code {
			t.Errorf("a join subscribing to 120 missing names of 32,002 characters: error %d, want INVALID_TOPIC_EXCEPTION (%d)",
				resp.ErrorCode, kerr.InvalidTopicException.Code)
		}
	}
	if grown := int64(heapInUse()) - int64(before); grown > 16<<20 {
		t.Errorf("16 joins of long member ids and missing topic names: the heap grew %d MB, want at most 16", grown>>20)
	}
	topics := []string{s.Topic}
	for i := range 1001 {
		topics = append(topics, fmt.Sprintf("a-missing-%d", i))
	}
	resp := join("a-many-missing", "", topics)
	if resp.ErrorCode != kerr.InvalidRequest.Code || resp.ErrorMessage == nil || !strings.Contains(*resp.ErrorMessage, "1001") {
		t.Errorf("a join subscribing to 1,001 missing topics: error %d (%v), want INVALID_REQUEST naming them", resp.ErrorCode, resp.ErrorMessage)
	}
	if resp := join("a-few-missing", "", []string{s.Topic, "a-missing"}); resp.ErrorCode != 0 {
		t.Errorf("a join subscribing to the topic and one missing: error %d, want joined", resp.ErrorCode)
	}
}
