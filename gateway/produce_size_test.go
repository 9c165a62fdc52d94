package gateway

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/capgate/capgate/api"
)

// producedAt posts body as a produce to partition 0 and returns its base
// offset, failing the test unless it was 200.
func producedAt(t *testing.T, h *harness, token, body string) int64 {
	t.Helper()
	r := h.do(http.MethodPost, recordsURL(0), token, strings.NewReader(body), "Content-Type", "application/json")
	var pr api.ProduceResponse
	if err := json.Unmarshal(r.body, &pr); err != nil || r.status != http.StatusOK {
		t.Fatalf("produce: %d %.300s", r.status, r.body)
	}
	return pr.BaseOffset
}

// valueOfBatch is a produce body of one record whose value makes a
// one-record batch of exactly size bytes.
func valueOfBatch(t *testing.T, size int) []byte {
	t.Helper()
	for n := size - 80; n < size; n++ {
		v := make([]byte, n)
		if oneRecordBatchBytes(&kgo.Record{Value: v}) == size {
			return v
		}
	}
	t.Fatalf("no value makes a %d-byte batch", size)
	return nil
}

// TestProduceOfARecordOverTheProducerLimitWritesNothing is redteam4 item
// 6: a record over Kafka's message size answered 502 broker_error
// (retry!) although the client sent bad input, and kgo failed that record
// alone before sending it while the produce's other records were written.
// Now the whole produce is refused 413 record_too_large naming the limit,
// nothing written; a record of exactly the limit is produced.
func TestProduceOfARecordOverTheProducerLimitWritesNothing(t *testing.T) {
	h := newHarness(t, nil)
	producer, _ := h.mint(withOps(capClaims(0), "fetch", "produce"))
	first := producedAt(t, h, producer, `{"records":[{"value":"eA=="}]}`)

	over := base64.StdEncoding.EncodeToString(valueOfBatch(t, maxRecordBatchBytes+100))
	r := h.do(http.MethodPost, recordsURL(0), producer, strings.NewReader(`{"records":[{"value":"eA=="},{"value":"`+over+`"}]}`), "Content-Type", "application/json")
	expectError(t, r, http.StatusRequestEntityTooLarge, api.CodeRecordTooLarge)
	if !strings.Contains(string(r.body), "records[1]") || !strings.Contains(string(r.body), strconv.Itoa(maxRecordBatchBytes)) {
		t.Errorf("the refusal names neither the record nor the limit: %s", r.body)
	}
	if got := producedAt(t, h, producer, `{"records":[{"value":"eA=="}]}`); got != first+1 {
		t.Fatalf("after the refused produce the next landed at %d, want %d: part of it was written", got, first+1)
	}

	at := base64.StdEncoding.EncodeToString(valueOfBatch(t, maxRecordBatchBytes))
	if got := producedAt(t, h, producer, `{"records":[{"value":"`+at+`"}]}`); got != first+2 {
		t.Fatalf("a record of exactly the limit landed at %d, want %d", got, first+2)
	}
}

// TestProduceOverTheTopicMessageLimitIs413 is the broker's refusal of a
// record (the topic's max.message.bytes under the producer's limit):
// MESSAGE_TOO_LARGE is the client's bad input, 413 record_too_large
// naming the setting, not 502 broker_error.
func TestProduceOverTheTopicMessageLimitIs413(t *testing.T) {
	h := newHarness(t, nil)
	direct, err := kgo.NewClient(kgo.SeedBrokers(h.kafka.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	limit := "1000"
	res, err := kadm.NewClient(direct).AlterTopicConfigs(context.Background(), []kadm.AlterConfig{{Name: "max.message.bytes", Value: &limit}}, testTopic)
	if err == nil {
		_, err = res.On(testTopic, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	producer, _ := h.mint(withOps(capClaims(0), "fetch", "produce"))
	first := producedAt(t, h, producer, `{"records":[{"value":"eA=="}]}`)
	big := base64.StdEncoding.EncodeToString(make([]byte, 2000))
	r := h.do(http.MethodPost, recordsURL(0), producer, strings.NewReader(`{"records":[{"value":"`+big+`"}]}`), "Content-Type", "application/json")
	expectError(t, r, http.StatusRequestEntityTooLarge, api.CodeRecordTooLarge)
	if !strings.Contains(string(r.body), "max.message.bytes") {
		t.Errorf("the refusal does not name the broker's setting: %s", r.body)
	}
	if got := producedAt(t, h, producer, `{"records":[{"value":"eA=="}]}`); got != first+1 {
		t.Fatalf("after the refused produce the next landed at %d, want %d", got, first+1)
	}
}
