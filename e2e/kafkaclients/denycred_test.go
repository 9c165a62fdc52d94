package kafkaclients

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/sdk"
)

// TestDeniedCredentialIsRefusedNotRetried: a client credential denied
// while its connections are open (their SASL sessions live on) is
// refused with GROUP_AUTHORIZATION_FAILED — final, as Kafka answers a
// principal whose ACL was removed — never COORDINATOR_NOT_AVAILABLE,
// which a client retries for ever: a kgo group consumer using it stops
// with that error instead of spinning silently; its Produce and
// ListOffsets answer TOPIC_AUTHORIZATION_FAILED, Metadata shows it no
// topic, and Kafka hands it no producer id (CLUSTER_AUTHORIZATION_FAILED).
func TestDeniedCredentialIsRefusedNotRetried(t *testing.T) {
	s := Start(t, Options{Partitions: 2})
	var minted coordinator.ClientResponse
	// With produce: its Produce and InitProducerId are refused for the
	// denial, not for want of the op.
	req := coordinator.ClientRequest{Name: "denied", Groups: []string{"denied"}, Topics: []string{"orders"}, Ops: []string{"consume", "produce"},
		TTLMs: time.Hour.Milliseconds()}
	if status, raw := s.Admin(t, http.MethodPost, "/v1/admin/clients", req, &minted); status != http.StatusOK {
		t.Fatalf("mint: %d %s", status, raw)
	}
	produceDirect(t, s, "orders", 0, 2)
	produceDirect(t, s, "orders", 1, 2)
	cl := kgoClient(t, s.KafkaAddrs(), minted.Credential, false, kgo.ConsumerGroup("denied"), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.ClientID("denied-kgo"))
	pollN(t, cl, 4)
	probe := dialRaw(t, s.KafkaAddrs()[0])
	if resp := probe.authenticate("PLAIN", minted.Credential); resp.ErrorCode != 0 {
		t.Fatalf("authenticate: %d", resp.ErrorCode)
	}

	s.Deny(t, minted.JTI)
	var code int16
	sdk.Eventually(t, 10*time.Second, "the gateway refusing the denied credential", func() (bool, string) {
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.SetVersion(3)
		fc.CoordinatorKey = "denied"
		code = probe.roundTrip(fc).(*kmsg.FindCoordinatorResponse).ErrorCode
		return code != 0, "still answered"
	})
	if code != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("FindCoordinator with a denied credential: error %d, want GROUP_AUTHORIZATION_FAILED (%d)", code, kerr.GroupAuthorizationFailed.Code)
	}
	// Its topic's partitions: TOPIC_AUTHORIZATION_FAILED, not a
	// retriable NOT_LEADER_OR_FOLLOWER.
	if code := probe.roundTrip(produceRecord("orders", 0, "x", 1000)).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("Produce with a denied credential: error %d, want TOPIC_AUTHORIZATION_FAILED", code)
	}
	meta := kmsg.NewPtrMetadataRequest()
	meta.SetVersion(12)
	meta.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("orders")}}
	if mt := probe.roundTrip(meta).(*kmsg.MetadataResponse).Topics; len(mt) != 1 || mt[0].ErrorCode != kerr.TopicAuthorizationFailed.Code || len(mt[0].Partitions) != 0 {
		t.Fatalf("Metadata of its topic with a denied credential: %+v, want TOPIC_AUTHORIZATION_FAILED", mt)
	}
	meta.Topics = nil // all
	if mt := probe.roundTrip(meta).(*kmsg.MetadataResponse).Topics; len(mt) != 0 {
		t.Fatalf("Metadata of all topics with a denied credential: %d topics, want none", len(mt))
	}
	if code := probe.roundTrip(kmsg.NewPtrInitProducerIDRequest()).(*kmsg.InitProducerIDResponse).ErrorCode; code != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("InitProducerId with a denied credential: error %d, want CLUSTER_AUTHORIZATION_FAILED", code)
	}
	if code := probe.roundTrip(listLatest("orders", 0)).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("ListOffsets with a denied credential: error %d, want TOPIC_AUTHORIZATION_FAILED", code)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var errs []error
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if n := len(fs.Records()); n > 0 {
			t.Fatalf("%d records fetched with a denied credential", n)
		}
		fs.EachError(func(_ string, _ int32, err error) { errs = append(errs, err) })
		if len(errs) > 0 && errors.Is(errs[len(errs)-1], kerr.GroupAuthorizationFailed) {
			return
		}
	}
	t.Fatalf("the kgo consumer of a denied credential never got GROUP_AUTHORIZATION_FAILED; its errors: %v", fmt.Sprint(errs))
}
