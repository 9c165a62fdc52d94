package sdk_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/sdk"
)

// TestAdminResetOfAnActiveConsumer: an administrator resets the committed
// offset of a partition an SDK consumer holds and has read past. The
// coordinator fences the consumer's epoch and grants the partition back
// from the reset offset: the consumer's commit of records it read before
// (their epoch's) is refused and the committed offset stays the reset's;
// its next Poll delivers from the reset offset under the new epoch. Back
// (to 5, the consumer at 20) and forward (to the log end, the consumer
// behind it). Epochs only rise. The SDK's half of what the Kafka
// listener's members now do too (e2e/kafkaclients
// TestAdminResetTellsAKgoMember).
func TestAdminResetOfAnActiveConsumer(t *testing.T) {
	t.Parallel()
	c := sdk.StartCluster(t, sdk.ClusterOptions{Partitions: 1})
	produce(t, c, 20)
	const group = "reset-active"
	consumer, err := client.NewConsumer(c.ClientConfig(sdk.MemberOptions{Group: group}, c.ClientCredential(t, group)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	t.Cleanup(func() { _ = consumer.Close(context.Background()) })
	if err := consumer.Join(ctx); err != nil {
		t.Fatal(err)
	}
	read := pollTo(ctx, t, consumer, 20)
	if err := consumer.Commit(ctx, client.MarkAfter(&read[9])); err != nil {
		t.Fatal(err)
	}
	epoch := read[0].Epoch

	// Back: to 5, the consumer having read to 20.
	epoch = resetTo(t, c, group, coordinator.OffsetResetRequest{Offset: 5}, epoch)
	if err := consumer.Commit(ctx, client.MarkAfter(&read[19])); err == nil {
		t.Errorf("the commit of offset 20, read before the reset, was accepted")
	}
	if got := committedOffset(t, c, group); got != 5 {
		t.Fatalf("committed %d after the consumer committed what it read before the reset, want the reset's 5", got)
	}
	again := pollTo(ctx, t, consumer, 20)
	if got := offsetsOf(again); !slices.Equal(got, sdk.OffsetRange(5, 20)) || again[0].Epoch != epoch {
		t.Fatalf("after the reset the consumer read %v at epoch %d, want 5..19 at the new epoch %d", got, again[0].Epoch, epoch)
	}
	if err := consumer.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := committedOffset(t, c, group); got != 20 {
		t.Fatalf("committed %d after reading again, want 20", got)
	}

	// Forward: to the log end (30), the consumer having read to 25.
	produce(t, c, 10)
	more := pollTo(ctx, t, consumer, 30)
	at24 := more[slices.IndexFunc(more, func(r client.Record) bool { return r.Offset == 24 })]
	if err := consumer.Commit(ctx, client.MarkAfter(&at24)); err != nil {
		t.Fatal(err)
	}
	epoch = resetTo(t, c, group, coordinator.OffsetResetRequest{To: "latest"}, epoch)
	if err := consumer.Commit(ctx, client.MarkAfter(&more[len(more)-1])); err == nil {
		t.Errorf("the commit of offset 30, read before the reset, was accepted")
	}
	if got := committedOffset(t, c, group); got != 30 {
		t.Fatalf("committed %d, want the reset's 30", got)
	}
	produce(t, c, 3)
	last := pollTo(ctx, t, consumer, 33)
	if got := offsetsOf(last); !slices.Equal(got, sdk.OffsetRange(30, 33)) || last[0].Epoch != epoch {
		t.Fatalf("after the reset to the end the consumer read %v at epoch %d, want 30..32 at %d", got, last[0].Epoch, epoch)
	}
	if err := consumer.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := committedOffset(t, c, group); got != 33 {
		t.Errorf("committed %d, want 33", got)
	}
}

// pollTo polls until a record before offset end was delivered (the
// records from offset end-1 backwards to where Poll started).
func pollTo(ctx context.Context, t *testing.T, consumer *client.Consumer, end int64) []client.Record {
	t.Helper()
	var out []client.Record
	for len(out) == 0 || out[len(out)-1].Offset < end-1 {
		recs, err := consumer.Poll(ctx)
		if err != nil {
			t.Fatalf("polled %v, want up to offset %d: %v", offsetsOf(out), end-1, err)
		}
		out = append(out, recs...)
	}
	return out
}

func offsetsOf(recs []client.Record) []int64 {
	out := make([]int64, 0, len(recs))
	for _, r := range recs {
		out = append(out, r.Offset)
	}
	return out
}

// resetTo resets the group's committed offset of partition 0 and waits
// until the partition is owned again under an epoch above before, which
// it returns.
func resetTo(t *testing.T, c *sdk.Cluster, group string, req coordinator.OffsetResetRequest, before uint64) uint64 {
	t.Helper()
	if status, raw := c.Admin(t, http.MethodPut, "/v1/admin/groups/"+group+"/partitions/"+c.Topic+"/0/offset", req, nil); status != http.StatusOK {
		t.Fatalf("offsets reset: %d %s", status, raw)
	}
	var epoch uint64
	sdk.Eventually(t, wait, "the partition granted again under a new epoch", func() (bool, string) {
		p := c.Describe(t, group).Partitions[0]
		epoch = p.Epoch
		return p.State == "owned" && p.Epoch > before, fmt.Sprintf("%s at epoch %d", p.State, p.Epoch)
	})
	return epoch
}

func committedOffset(t *testing.T, c *sdk.Cluster, group string) int64 {
	t.Helper()
	p := c.Describe(t, group).Partitions[0]
	if p.Committed == nil {
		return -1
	}
	return *p.Committed
}
