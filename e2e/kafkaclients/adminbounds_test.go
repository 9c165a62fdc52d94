package kafkaclients

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAdminReadBoundsOnTheRealStack: redteam3 items 2 and 3 against the
// real coordinator and gateway. An OffsetFetch naming one group 101 times
// (the probe's shape) answers the first 100 from the group's committed
// offsets and the 101st INVALID_REQUEST, as DescribeGroups' 101st; a
// ListGroups whose states filter has 17 entries answers INVALID_REQUEST
// and lists nothing, one with a valid state still lists. The listener's
// own tests (gateway/kafkaproto adminbounds_test.go) count the
// coordinator's calls and check the hang-up.
func TestAdminReadBoundsOnTheRealStack(t *testing.T) {
	s := Start(t, Options{Partitions: 2})
	cred := tenantCredential(t, s, "tenant-a", []string{"a-*"})
	cl := kgoClient(t, s.KafkaAddrs(), cred, false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	req := kmsg.NewPtrOffsetFetchRequest()
	for range 101 {
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group = "a-orders"
		req.Groups = append(req.Groups, g)
	}
	raw, err := cl.Broker(0).Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	groups := raw.(*kmsg.OffsetFetchResponse).Groups
	if len(groups) != 101 {
		t.Fatalf("%d groups answered, want 101", len(groups))
	}
	for i, g := range groups[:100] {
		if g.ErrorCode != 0 {
			t.Fatalf("entry %d of a-orders: error %d, want its committed offsets (none)", i, g.ErrorCode)
		}
	}
	if g := groups[100]; g.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("entry 101: error %d, want INVALID_REQUEST", g.ErrorCode)
	}

	list := func(states []string) *kmsg.ListGroupsResponse {
		t.Helper()
		req := kmsg.NewPtrListGroupsRequest()
		req.StatesFilter = states
		raw, err := cl.Broker(0).Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return raw.(*kmsg.ListGroupsResponse)
	}
	var many []string
	for i := range 17 {
		many = append(many, fmt.Sprintf("state-%d", i))
	}
	if resp := list(many); resp.ErrorCode != kerr.InvalidRequest.Code || len(resp.Groups) != 0 {
		t.Errorf("17 states: error %d, %d groups; want INVALID_REQUEST listing nothing", resp.ErrorCode, len(resp.Groups))
	}
	if resp := list([]string{"Empty", "Stable"}); resp.ErrorCode != 0 {
		t.Errorf("2 states: error %d, want an answer", resp.ErrorCode)
	}
}
