package kafkaclients

import (
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/coordinator"
)

// TestKafkaInternalTopicsAreNoClients: a client credential for any topic
// ("*") asked ListOffsets of Kafka's own topics (every group's committed
// offsets live in __consumer_offsets), which Metadata already hid from
// it; now it is TOPIC_AUTHORIZATION_FAILED, as for a topic it may not
// read.
func TestKafkaInternalTopicsAreNoClients(t *testing.T) {
	s := Start(t, Options{Topic: "__consumer_offsets", Partitions: 1})
	var minted coordinator.ClientResponse
	req := coordinator.ClientRequest{Name: "any", Groups: []string{"*"}, Topics: []string{"*"}, TTLMs: time.Hour.Milliseconds()}
	if status, raw := s.Admin(t, http.MethodPost, "/v1/admin/clients", req, &minted); status != http.StatusOK {
		t.Fatalf("mint: %d %s", status, raw)
	}
	probe := dialRaw(t, s.KafkaAddrs()[0])
	if resp := probe.authenticate("PLAIN", minted.Credential); resp.ErrorCode != 0 {
		t.Fatalf("authenticate: %d", resp.ErrorCode)
	}
	if code := probe.roundTrip(listLatest("__consumer_offsets", 0)).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("ListOffsets of __consumer_offsets with a credential for any topic: error %d, want TOPIC_AUTHORIZATION_FAILED", code)
	}
}
