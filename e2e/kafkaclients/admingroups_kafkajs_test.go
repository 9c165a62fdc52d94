package kafkaclients

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/e2e/sdk"
)

// kafkajsAdminEvent is one line of testdata/kafkajs/admin.js.
type kafkajsAdminEvent struct {
	Ev     string `json:"ev"`
	Op     string `json:"op"`
	Group  string `json:"group"`
	Type   string `json:"type"`
	Err    string `json:"err"`
	State  string `json:"state"`
	Groups []struct {
		GroupID      string `json:"groupId"`
		ProtocolType string `json:"protocolType"`
	} `json:"groups"`
	Members []struct {
		MemberID   string             `json:"memberId"`
		ClientID   string             `json:"clientId"`
		ClientHost string             `json:"clientHost"`
		Topics     []string           `json:"topics"`
		Assignment map[string][]int32 `json:"assignment"`
	} `json:"members"`
	Partitions []struct {
		Partition int32 `json:"partition"`
		Offset    int64 `json:"offset"`
	} `json:"partitions"`
}

// kafkajsAdmin runs admin.js with token: its list (keyed "") and, per
// group g, its describe (keyed g) and its offsets (keyed "offsets:"+g),
// or the errors in their place.
func kafkajsAdmin(t testing.TB, s *Stack, token string, groups ...string) map[string]kafkajsAdminEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "admin.js")
	cmd.Dir = kafkajsDir(t)
	cmd.Env = append(os.Environ(), "BROKERS="+strings.Join(s.KafkaAddrs(), ","), "CAPGATE_TOKEN="+token,
		"GROUPS="+strings.Join(groups, ","), "TOPIC="+s.Topic)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node admin.js: %v\n%s", err, out)
	}
	events := map[string]kafkajsAdminEvent{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var ev kafkajsAdminEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("admin.js printed %q", sc.Bytes())
		}
		key := ev.Group
		if ev.Ev == "offsets" || ev.Op == "offsets" {
			key = "offsets:" + ev.Group
		}
		events[key] = ev
	}
	return events
}

// TestKafkaJSAdminGroups: KafkaJS's admin.listGroups() and
// describeGroups() through the listener. Tenant A lists its running
// group once (the gateway is 4 brokers to it — its fetch lanes — and
// KafkaJS concatenates every broker's list) and describes it Stable with
// its member (client id, host) and an assignment, decoded by KafkaJS's
// own consumer-protocol decoder, of every partition; its
// admin.fetchOffsets from this non-member client answers the committed
// offsets (it was UNKNOWN_MEMBER_ID). Tenant B lists
// nothing of A's and its describe of A's group fails (FindCoordinator
// refuses it GROUP_AUTHORIZATION_FAILED, which KafkaJS reports as "failed
// to find group coordinator", as against Kafka). Fails without the feature: listGroups and
// describeGroups throw (the broker does not support the API).
func TestKafkaJSAdminGroups(t *testing.T) {
	s := Start(t, Options{Partitions: 4})
	credA := tenantCredential(t, s, "tenant-a", []string{"a-*"})
	credB := tenantCredential(t, s, "tenant-b", []string{"b-*"})
	m := joinGroup(t, s, "a1", "a-orders", credA, cooperativeSticky)
	for p := range int32(4) {
		produceDirect(t, s, "orders", p, 2)
	}
	sdk.Eventually(t, 30*time.Second, "a-orders settled, 8 records polled", func() (bool, string) {
		if ok, why := settled(t, s, "a-orders", 1); !ok {
			return false, why
		}
		if n := len(m.Records()); n != 8 {
			return false, fmt.Sprintf("%d polled", n)
		}
		return clientsSettled(4, m)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}

	var a map[string]kafkajsAdminEvent
	sdk.Eventually(t, 60*time.Second, "KafkaJS describes a-orders Stable", func() (bool, string) {
		a = kafkajsAdmin(t, s, credA, "a-orders")
		return a["a-orders"].State == "Stable", a["a-orders"].State + a["a-orders"].Err
	})
	if list := a[""]; list.Ev != "list" || len(list.Groups) != 1 || list.Groups[0].GroupID != "a-orders" || list.Groups[0].ProtocolType != "consumer" {
		t.Errorf("tenant A's listGroups: %+v, want a-orders once, protocol type consumer", list)
	}
	d := a["a-orders"]
	if len(d.Members) != 1 {
		t.Fatalf("describe a-orders: %+v, want 1 member", d)
	}
	mem := d.Members[0]
	owned := slices.Sorted(slices.Values(mem.Assignment["orders"]))
	if mem.ClientID != "a1" || mem.ClientHost != "/127.0.0.1" || !slices.Equal(mem.Topics, []string{"orders"}) || !slices.Equal(owned, []int32{0, 1, 2, 3}) {
		t.Errorf("member %+v, want client a1 on /127.0.0.1 subscribed to orders and assigned 0-3", mem)
	}
	got := map[int32]int64{}
	for _, p := range a["offsets:a-orders"].Partitions {
		got[p.Partition] = p.Offset
	}
	if want := map[int32]int64{0: 2, 1: 2, 2: 2, 3: 2}; !maps.Equal(got, want) {
		t.Errorf("tenant A's fetchOffsets: %+v, want %v", a["offsets:a-orders"], want)
	}

	b := kafkajsAdmin(t, s, credB, "a-orders")
	if list := b[""]; list.Ev != "list" || len(list.Groups) != 0 {
		t.Errorf("tenant B's listGroups: %+v, want an empty list", list)
	}
	// FindCoordinator refuses B the group first (GROUP_AUTHORIZATION_FAILED),
	// which KafkaJS reports as it does Kafka's: no coordinator found.
	if e := b["a-orders"]; e.Ev != "error" || e.Type != "KafkaJSGroupCoordinatorNotFound" && e.Type != "GROUP_AUTHORIZATION_FAILED" {
		t.Errorf("tenant B describes a-orders: %+v, want it refused", e)
	}
	if e := b["offsets:a-orders"]; e.Ev != "error" || len(e.Partitions) != 0 {
		t.Errorf("tenant B fetches a-orders' offsets: %+v, want it refused", e)
	}
}
