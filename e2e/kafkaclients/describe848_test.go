package kafkaclients

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/e2e/sdk"
)

// TestConsumerGroupDescribe: the listener serves KIP-848 heartbeats, so
// it serves KIP-848's describe (ConsumerGroupDescribe, key 69) too, and
// lists it in ApiVersions. kadm's DescribeConsumerGroups of all groups
// (ListGroups by type "consumer", then key 69) describes a-orders while
// a KIP-848 and a classic kgo member consume it: Stable, the capgate
// assignor, both members with their kgo member ids, client ids, host,
// member type (consumer, classic), the member epoch (classic:
// generation) kgo was told, subscription, and assignments that are what
// each kgo member was assigned and cover the topic once; the group epoch
// is at least every member's. An unknown group the tenant may join is
// GROUP_ID_NOT_FOUND; another tenant is refused
// GROUP_AUTHORIZATION_FAILED; a request naming a-orders 101 times
// answers 100 descriptions and INVALID_REQUEST. kadm's DescribeGroups of
// all groups (ListGroups by type "classic") still finds a-orders: a
// capgate group is listed as either type. Before, kadm failed ("broker
// is too old") and ListGroups typed the groups "classic" only.
func TestConsumerGroupDescribe(t *testing.T) {
	s := Start(t, Options{Partitions: 6})
	credA := tenantCredential(t, s, "tenant-a", []string{"a-*"})
	credB := tenantCredential(t, s, "tenant-b", []string{"b-*"})
	m1, m2 := twoMembersSettled(t, s, credA, kip848, cooperativeSticky)
	cl := kgoClient(t, s.KafkaAddrs(), credA, false, kgo.ClientID("describer"))
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	versions, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(versions.ApiKeys, func(k kmsg.ApiVersionsResponseApiKey) bool {
		return k.ApiKey == int16(kmsg.ConsumerGroupDescribe) && k.MinVersion == 0 && k.MaxVersion == 1
	}) {
		t.Fatalf("ApiVersions does not list ConsumerGroupDescribe v0-1: %+v", versions.ApiKeys)
	}

	var g kadm.DescribedConsumerGroup
	sdk.Eventually(t, 20*time.Second, "a-orders described Stable with both members' assignments", func() (bool, string) {
		all, err := adm.DescribeConsumerGroups(ctx)
		if err != nil {
			return false, err.Error()
		}
		g = all["a-orders"]
		why := fmt.Sprintf("%+v", all)
		if g.Err != nil || g.State != "Stable" || len(g.Members) != 2 {
			return false, why
		}
		for _, gm := range g.Members {
			if gm.MemberID == "" || len(gm.Assignment) == 0 {
				return false, why
			}
		}
		return true, why
	})
	if g.AssignorName == "" {
		t.Errorf("assignor name empty: %+v", g)
	}
	seen := map[int32]int{}
	for _, m := range []*groupMember{m1, m2} {
		id, epoch := m.cl.GroupMetadata()
		i := slices.IndexFunc(g.Members, func(gm kadm.ConsumerGroupMember) bool { return gm.MemberID == id })
		if i < 0 {
			t.Errorf("%s (kgo member id %s) not described: %+v", m.name, id, g.Members)
			continue
		}
		gm := g.Members[i]
		wantType := int8(1)
		if m == m2 {
			wantType = 0
		}
		if gm.ClientID != m.name || gm.ClientHost != "/127.0.0.1" || gm.MemberType != wantType || gm.MemberEpoch != epoch ||
			!slices.Equal(gm.SubscribedTopics, []string{"orders"}) {
			t.Errorf("%s described %+v, want client id %s, host /127.0.0.1, type %d, epoch %d (kgo's), subscribed [orders]",
				m.name, gm, m.name, wantType, epoch)
		}
		if gm.MemberEpoch > g.Epoch || g.AssignmentEpoch != g.Epoch {
			t.Errorf("%s: member epoch %d, group epoch %d, assignment epoch %d", m.name, gm.MemberEpoch, g.Epoch, g.AssignmentEpoch)
		}
		got := gm.Assignment["orders"]
		var parts []int32
		for p := range got {
			parts = append(parts, p)
			seen[p]++
		}
		slices.Sort(parts)
		if !slices.Equal(parts, m.Assigned()) || fmt.Sprint(gm.TargetAssignment) != fmt.Sprint(gm.Assignment) {
			t.Errorf("%s: described assignment %v (target %v), kgo was assigned %v", m.name, parts, gm.TargetAssignment, m.Assigned())
		}
	}
	if len(seen) != 6 {
		t.Errorf("described assignments cover %v, want partitions 0-5 once", seen)
	}

	classic, err := adm.DescribeGroups(ctx) // lists the "classic" groups first
	if err != nil {
		t.Fatal(err)
	}
	if d := classic["a-orders"]; d.Err != nil || len(d.Members) != 2 {
		t.Errorf("kadm's DescribeGroups of all (classic) groups: %+v, want a-orders with 2 members", classic)
	}

	described, err := adm.DescribeConsumerGroups(ctx, "a-nothing")
	if err != nil {
		t.Fatal(err)
	}
	if err := described["a-nothing"].Err; !errors.Is(err, kerr.GroupIDNotFound) {
		t.Errorf("unknown a-nothing: %v, want GROUP_ID_NOT_FOUND", err)
	}
	if _, err := kadm.NewClient(kgoClient(t, s.KafkaAddrs(), credB, false)).DescribeConsumerGroups(ctx, "a-orders"); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Errorf("tenant B describes a-orders: %v, want GROUP_AUTHORIZATION_FAILED", err)
	}

	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	for range 101 {
		req.Groups = append(req.Groups, "a-orders")
	}
	raw, err := cl.Broker(0).Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	groups := raw.(*kmsg.ConsumerGroupDescribeResponse).Groups
	if len(groups) != 101 {
		t.Fatalf("%d groups answered, want 101", len(groups))
	}
	for i, rg := range groups[:100] {
		if rg.ErrorCode != 0 || len(rg.Members) != 2 {
			t.Fatalf("entry %d of a-orders: error %d, %d members; want it described", i, rg.ErrorCode, len(rg.Members))
		}
	}
	if rg := groups[100]; rg.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("entry 101: error %d, want INVALID_REQUEST", rg.ErrorCode)
	}
}
