package sdk_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/sdk"
)

// TestOffsetOutOfRange checks the 416 wire contract the SDK relies on —
// earliest and latest as JSON numbers next to the code, for JSON and raw
// fetches — and that the SDK moves a partition whose start offset was
// deleted by retention to the earliest offset: an admin resets the
// committed offset below the log start, the partition is regranted there,
// and the consumer carries on from the log start without a stall.
func TestOffsetOutOfRange(t *testing.T) {
	t.Parallel()
	c := sdk.StartCluster(t, sdk.ClusterOptions{Partitions: 1})
	produce(t, c, 20)
	deleteRecords(t, c, 10)

	var grant api.CapabilityResponse
	req := coordinator.SharedGrantRequest{Topic: c.Topic, Partition: 0, Ops: []string{"fetch"}, TTLMs: 60000, Holder: "e2e-reader"}
	if status, raw := c.Admin(t, http.MethodPost, "/v1/admin/capabilities", req, &grant); status != http.StatusOK {
		t.Fatalf("mint: %d %s", status, raw)
	}
	for _, accept := range []string{api.MediaJSON, api.MediaRecordBatch} {
		checkRange(t, c, grant.Capability, accept, 2, 10, 20)
		checkRange(t, c, grant.Capability, accept, 25, 10, 20)
	}

	m := c.NewMember(t, sdk.MemberOptions{Name: "m1", Group: "oor"})
	sdk.Eventually(t, wait, "records 10..19 delivered", func() (bool, string) {
		n := len(m.Deliveries())
		return n >= 10, fmt.Sprintf("%d delivered", n)
	})
	before := m.Deliveries()
	if got := offsetsAbove(before, 0); !slices.Equal(got, []int64{10, 11, 12, 13, 14, 15, 16, 17, 18, 19}) {
		t.Fatalf("delivered %v, want the log from its start 10", got)
	}
	if status, raw := c.Admin(t, http.MethodPut, "/v1/admin/groups/oor/partitions/"+c.Topic+"/0/offset", coordinator.OffsetResetRequest{Offset: 3}, nil); status != http.StatusOK {
		t.Fatalf("reset offset: %d %s", status, raw)
	}
	sdk.Eventually(t, wait, "records 10..19 delivered again under the new epoch", func() (bool, string) {
		got := offsetsAbove(m.Deliveries(), before[0].Epoch)
		return len(got) >= 10, fmt.Sprintf("%v", got)
	})
	produce(t, c, 5)
	sdk.Eventually(t, wait, "records 10..24 under the new epoch", func() (bool, string) {
		got := offsetsAbove(m.Deliveries(), before[0].Epoch)
		want := []int64{10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24}
		return slices.Equal(got, want), fmt.Sprintf("%v", got)
	})
	var refused, moved bool
	for _, f := range m.Transport.Fetches() {
		refused = refused || (f.Offset == 3 && f.Status == http.StatusRequestedRangeNotSatisfiable)
		moved = moved || (refused && f.Offset == 10 && f.Status == http.StatusOK)
	}
	if !refused || !moved {
		t.Errorf("fetch log: 416 at 3 %v, then 10 fetched %v", refused, moved)
	}
}

func offsetsAbove(ds []sdk.Delivery, epoch uint64) []int64 {
	var out []int64
	for _, d := range ds {
		if d.Epoch > epoch {
			out = append(out, d.Offset)
		}
	}
	return out
}

// checkRange fetches at offset and expects 416 with the bounds as numbers.
func checkRange(t *testing.T, c *sdk.Cluster, capability, accept string, offset, earliest, latest int64) {
	t.Helper()
	url := c.GatewayURLs()[0] + "/v1/topics/" + c.Topic + "/partitions/0/records?offset=" + strconv.FormatInt(offset, 10)
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+capability)
	req.Header.Set("Accept", accept)
	resp, err := c.HTTP().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var body struct {
		Error map[string]json.RawMessage `json:"error"`
	}
	if resp.StatusCode != http.StatusRequestedRangeNotSatisfiable || json.Unmarshal(raw, &body) != nil {
		t.Fatalf("%s fetch at %d: %d %s, want 416", accept, offset, resp.StatusCode, raw)
	}
	for name, want := range map[string]int64{"earliest": earliest, "latest": latest} {
		var got int64 // a JSON string or float would not decode into int64
		if err := json.Unmarshal(body.Error[name], &got); err != nil || got != want {
			t.Errorf("%s fetch at %d: %s = %s, want the number %d (%v)", accept, offset, name, body.Error[name], want, err)
		}
	}
	if code := string(body.Error["code"]); code != `"offset_out_of_range"` {
		t.Errorf("code %s", code)
	}
}

func produce(t *testing.T, c *sdk.Cluster, n int) {
	t.Helper()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Value: []byte(strconv.Itoa(i))}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Broker.Produce(ctx, c.Topic, 0, recs); err != nil {
		t.Fatal(err)
	}
}

// deleteRecords moves partition 0's log start to offset (retention).
func deleteRecords(t *testing.T, c *sdk.Cluster, offset int64) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Kafka.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.TimeoutMillis = 5000
	topic := kmsg.NewDeleteRecordsRequestTopic()
	topic.Topic = c.Topic
	part := kmsg.NewDeleteRecordsRequestTopicPartition()
	part.Partition, part.Offset = 0, offset
	topic.Partitions = append(topic.Partitions, part)
	req.Topics = append(req.Topics, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("delete records: %v %+v", err, resp)
	}
}
