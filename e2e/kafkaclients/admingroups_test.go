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

// tenantCredential mints a client credential for the groups patterns.
func tenantCredential(t testing.TB, s *Stack, name string, groups []string) string {
	t.Helper()
	cred, err := s.Stack.ClientCredential(context.Background(), name, groups, []string{s.Topic}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return cred
}

// twoMembersSettled starts kgo members a1 and a2 of a-orders (of the
// protocols named) and waits until they share the topic's 6 partitions.
func twoMembersSettled(t *testing.T, s *Stack, cred string, p1, p2 protocol) (*groupMember, *groupMember) {
	t.Helper()
	m1 := joinGroup(t, s, "a1", "a-orders", cred, p1)
	m2 := joinGroup(t, s, "a2", "a-orders", cred, p2)
	sdk.Eventually(t, 30*time.Second, "a-orders settled with 2 members", func() (bool, string) {
		if ok, why := settled(t, s, "a-orders", 2); !ok {
			return false, why
		}
		return clientsSettled(6, m1, m2)
	})
	return m1, m2
}

// TestAdminGroupsSeeOwnGroup: kadm's ListGroups and DescribeGroups through
// the listener see the principal's own group while two kgo members
// consume: listed Stable with protocol type consumer, described with
// both members (their Kafka member ids, client ids, host) whose
// assignments, decoded as Kafka's consumer protocol, cover the topic's
// partitions once. An unknown group the credential may join is Dead.
// Without ListGroups/DescribeGroups in ApiVersions kadm fails ("broker is
// too old").
func TestAdminGroupsSeeOwnGroup(t *testing.T) {
	s := Start(t, Options{Partitions: 6})
	credA := tenantCredential(t, s, "tenant-a", []string{"a-*"})
	m1, m2 := twoMembersSettled(t, s, credA, cooperativeSticky, kip848)
	adm := kadm.NewClient(kgoClient(t, s.KafkaAddrs(), credA, false))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var listed kadm.ListedGroups
	sdk.Eventually(t, 20*time.Second, "a-orders listed Stable", func() (bool, string) {
		var err error
		listed, err = adm.ListGroups(ctx)
		if err != nil {
			return false, err.Error()
		}
		g, ok := listed["a-orders"]
		return ok && g.State == "Stable", fmt.Sprintf("%+v", listed)
	})
	if g := listed["a-orders"]; g.ProtocolType != "consumer" || g.GroupType != "consumer" {
		t.Errorf("listed %+v, want protocol type consumer, type consumer", g)
	}

	var d kadm.DescribedGroup
	sdk.Eventually(t, 20*time.Second, "a-orders described Stable with 2 members", func() (bool, string) {
		described, err := adm.DescribeGroups(ctx, "a-orders")
		if err != nil {
			return false, err.Error()
		}
		d = described["a-orders"]
		return d.Err == nil && d.State == "Stable" && len(d.Members) == 2, fmt.Sprintf("%+v", d)
	})
	want := map[string]string{}
	for _, m := range []*groupMember{m1, m2} {
		id, _ := m.cl.GroupMetadata()
		want[id] = m.name
	}
	var owned []int32
	for _, mem := range d.Members {
		if want[mem.MemberID] != mem.ClientID || mem.ClientHost != "/127.0.0.1" {
			t.Errorf("member %s client %q host %q; want the kgo members %v on /127.0.0.1", mem.MemberID, mem.ClientID, mem.ClientHost, want)
		}
		meta, ok := mem.Join.AsConsumer()
		if !ok || !slices.Equal(meta.Topics, []string{"orders"}) {
			t.Errorf("member %s subscription %+v, want [orders]", mem.MemberID, meta)
		}
		a, ok := mem.Assigned.AsConsumer()
		if !ok {
			t.Fatalf("member %s: assignment not a consumer assignment", mem.MemberID)
		}
		for _, tp := range a.Topics {
			if tp.Topic != "orders" {
				t.Errorf("member %s assigned topic %q", mem.MemberID, tp.Topic)
			}
			owned = append(owned, tp.Partitions...)
		}
	}
	slices.Sort(owned)
	if !slices.Equal(owned, []int32{0, 1, 2, 3, 4, 5}) {
		t.Errorf("assignments cover %v, want every partition of orders once", owned)
	}

	dead, err := adm.DescribeGroups(ctx, "a-nothing")
	if err != nil || dead["a-nothing"].State != "Dead" || dead["a-nothing"].Err != nil || len(dead["a-nothing"].Members) != 0 {
		t.Errorf("unknown group a-nothing: %+v %v, want Dead without members", dead["a-nothing"], err)
	}
}

// TestAdminGroupsTenantIsolation is the attack: tenant B's credential
// (groups b-*) asks the same listener about tenant A's running group.
// ListGroups does not name it (B's own group is listed, so the answer is
// not just empty), DescribeGroups answers GROUP_AUTHORIZATION_FAILED for
// it — and for an A-style name that does not exist, so B cannot probe
// which of A's groups exist — and a partition capability's connection
// lists nothing. Fails without the feature (no ListGroups at all) and if
// the gateway listed or described with anything but the principal's own
// token (the admin API sees every group).
func TestAdminGroupsTenantIsolation(t *testing.T) {
	s := Start(t, Options{Partitions: 4})
	credA := tenantCredential(t, s, "tenant-a", []string{"a-*"})
	credB := tenantCredential(t, s, "tenant-b", []string{"b-*"})
	a := joinGroup(t, s, "a1", "a-orders", credA, cooperativeSticky)
	b := joinGroup(t, s, "b1", "b-orders", credB, cooperativeSticky)
	sdk.Eventually(t, 30*time.Second, "both groups settled", func() (bool, string) {
		if ok, why := settled(t, s, "a-orders", 1); !ok {
			return false, why
		}
		if ok, why := settled(t, s, "b-orders", 1); !ok {
			return false, why
		}
		return clientsSettled(4, a)
	})
	_ = b
	clB := kgoClient(t, s.KafkaAddrs(), credB, false)
	admB := kadm.NewClient(clB)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	sdk.Eventually(t, 20*time.Second, "B lists its own group", func() (bool, string) {
		listed, err := admB.ListGroups(ctx)
		if err != nil {
			return false, err.Error()
		}
		if _, ok := listed["a-orders"]; ok {
			t.Fatalf("tenant B lists tenant A's group: %+v", listed)
		}
		_, ok := listed["b-orders"]
		return ok && len(listed) == 1, fmt.Sprintf("%+v", listed)
	})
	for _, group := range []string{"a-orders", "a-nothing"} {
		_, err := admB.DescribeGroups(ctx, group)
		if !errors.Is(err, kerr.GroupAuthorizationFailed) {
			t.Errorf("B describes %s: %v, want GROUP_AUTHORIZATION_FAILED", group, err)
		}
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Groups = []string{group}
		raw, err := clB.Broker(0).Request(ctx, req) // node 0: the gateway, not kgo's sharding (which turns the code into an error)
		if err != nil {
			t.Fatal(err)
		}
		if g := raw.(*kmsg.DescribeGroupsResponse).Groups[0]; g.ErrorCode != kerr.GroupAuthorizationFailed.Code || len(g.Members) != 0 || g.State != "" {
			t.Errorf("raw DescribeGroups %s by B: %+v, want GROUP_AUTHORIZATION_FAILED and nothing else", group, g)
		}
	}

	grant := s.Grant(t, "orders", 0, []string{"fetch"}, time.Minute)
	capCl := kgoClient(t, s.KafkaAddrs(), grant.Capability, false)
	resp, err := kmsg.NewPtrListGroupsRequest().RequestWith(ctx, capCl)
	if err != nil || resp.ErrorCode != 0 || len(resp.Groups) != 0 {
		t.Errorf("ListGroups with a partition capability: %+v %v, want nothing listed", resp, err)
	}
}

// TestAdminFetchOffsetsWithoutMember: kadm's FetchOffsets (an OffsetFetch
// naming no member) from a client that is not a member of the group —
// what lag exporters send — answers the group's committed offsets to the
// tenant that may join it (it answered UNKNOWN_MEMBER_ID), and
// GROUP_AUTHORIZATION_FAILED to another tenant. A request naming a member
// id the client did not open stays UNKNOWN_MEMBER_ID.
func TestAdminFetchOffsetsWithoutMember(t *testing.T) {
	s := Start(t, Options{Partitions: 4})
	credA := tenantCredential(t, s, "tenant-a", []string{"a-*"})
	credB := tenantCredential(t, s, "tenant-b", []string{"b-*"})
	m := joinGroup(t, s, "a1", "a-orders", credA, cooperativeSticky)
	for p := range int32(4) {
		produceDirect(t, s, "orders", p, 3)
	}
	sdk.Eventually(t, 30*time.Second, "a1 polled 12 records", func() (bool, string) {
		n := len(m.Records())
		return n == 12, fmt.Sprintf("%d polled", n)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}

	admA := kadm.NewClient(kgoClient(t, s.KafkaAddrs(), credA, false, kgo.ClientID("lag-exporter")))
	offsets, err := admA.FetchOffsets(ctx, "a-orders")
	if err != nil {
		t.Fatalf("tenant A fetches a-orders' offsets without a member: %v", err)
	}
	for p := range int32(4) {
		o, ok := offsets.Lookup("orders", p)
		if !ok || o.Err != nil || o.At != 3 {
			t.Errorf("orders/%d: %+v (found %v), want committed 3", p, o, ok)
		}
	}

	clB := kgoClient(t, s.KafkaAddrs(), credB, false)
	if _, err := kadm.NewClient(clB).FetchOffsets(ctx, "a-orders"); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Errorf("tenant B fetches a-orders' offsets: %v, want GROUP_AUTHORIZATION_FAILED", err)
	}
	id, _ := m.cl.GroupMetadata()
	req := kmsg.NewPtrOffsetFetchRequest()
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group, g.MemberID = "a-orders", kmsg.StringPtr(id)
	req.Groups = []kmsg.OffsetFetchRequestGroup{g}
	raw, err := kgoClient(t, s.KafkaAddrs(), credA, false, kgo.ClientID("other")).Broker(0).Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if code := raw.(*kmsg.OffsetFetchResponse).Groups[0].ErrorCode; code != kerr.UnknownMemberID.Code {
		t.Errorf("OffsetFetch under a1's member id from another client: error %d, want UNKNOWN_MEMBER_ID", code)
	}
}
