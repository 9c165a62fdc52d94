package kafkaclients

import (
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestPeersSpreadPartitions: with kafka_peers, a capability connection
// sees every gateway as a broker and the partitions spread over them; a
// kgo consumer bootstrapped at one gateway fetches its partition from the
// other when that one leads it. A client-credential connection is told
// the cluster is the gateway it talks to, as kafka_fetch_lanes brokers.
func TestPeersSpreadPartitions(t *testing.T) {
	s := Start(t, Options{Partitions: 8, Gateways: 2, Peers: true})
	addrs := s.KafkaAddrs()
	grant := s.Grant(t, "orders", 0, []string{"fetch"}, time.Minute)
	meta := func(token string) *kmsg.MetadataResponse {
		r := dialRaw(t, addrs[0])
		r.authenticate("OAUTHBEARER", token)
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(12)
		return r.roundTrip(req).(*kmsg.MetadataResponse)
	}
	m := meta(grant.Capability)
	if len(m.Brokers) != 2 || len(m.Topics) != 1 {
		t.Fatalf("capability metadata: %d brokers, %d topics, want 2 and 1", len(m.Brokers), len(m.Topics))
	}
	leaders := map[int32]int{}
	for _, p := range m.Topics[0].Partitions {
		leaders[p.Leader]++
	}
	if leaders[0] != 4 || leaders[1] != 4 {
		t.Fatalf("partition leaders %v, want 4 on each gateway", leaders)
	}
	var lead int32
	for _, p := range m.Topics[0].Partitions {
		if p.Partition == 0 {
			lead = p.Leader
		}
	}
	// A client credential is told the cluster is the gateway it talks
	// to, as kafka_fetch_lanes (4) brokers: gateway 0 of 2 is nodes 0,
	// 2, 4 and 6 at its advertised port + 0…3, its partitions spread
	// over them.
	c := meta(s.ClientCredential(t, "g"))
	host, port, _ := net.SplitHostPort(addrs[0])
	first, _ := strconv.Atoi(port)
	var ids []int32
	for j, b := range c.Brokers {
		if want := net.JoinHostPort(host, strconv.Itoa(first+j)); net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))) != want {
			t.Fatalf("client credential metadata: lane %d %+v, want it at %s", j, b, want)
		}
		ids = append(ids, b.NodeID)
	}
	if fmt.Sprint(ids) != "[0 2 4 6]" {
		t.Fatalf("client credential metadata: node ids %v, want [0 2 4 6]", ids)
	}
	lanes := map[int32]int{}
	for _, p := range c.Topics[0].Partitions {
		lanes[p.Leader]++
	}
	if len(lanes) != 4 || lanes[0]+lanes[2]+lanes[4]+lanes[6] != 8 {
		t.Fatalf("client credential metadata: partition leaders %v, want the 8 partitions over the 4 lanes", lanes)
	}

	produceDirect(t, s, "orders", 0, 3)
	other := addrs[1-lead] // bootstrap at the gateway that does not lead partition 0
	cl := kgoClient(t, []string{other}, grant.Capability, false,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"orders": {0: kgo.NewOffset().AtStart()}}))
	pollN(t, cl, 3)
	served := func(i int) float64 {
		return grepCount(gatewayMetrics(t, s, i), `capgate_gateway_requests_total{code="ok",route="kafka_fetch"}`)
	}
	if served(int(lead)) == 0 || served(1-int(lead)) != 0 {
		t.Fatalf("fetches served: gateway %d (leader) %v, gateway %d %v; want all on the leader", lead, served(int(lead)), 1-lead, served(1-int(lead)))
	}
}

// TestGroupFetchesUseEveryLane: a kgo group member reads its partitions
// through every fetch lane of its gateway — each lane a broker of its own
// to the client (a port, a connection, a Fetch in flight each) — and gets
// every record once, every Fetch checked against its member's
// capabilities whichever lane carried it.
func TestGroupFetchesUseEveryLane(t *testing.T) {
	s := Start(t, Options{Partitions: 8})
	for p := range int32(8) {
		produceDirect(t, s, "orders", p, 5)
	}
	var mu sync.Mutex
	fetchesByNode := map[int32]int{}
	hook := brokerReadHook(func(meta kgo.BrokerMetadata, key int16) {
		if key == int16(kmsg.Fetch) {
			mu.Lock()
			fetchesByNode[meta.NodeID]++
			mu.Unlock()
		}
	})
	cl := kgoClient(t, s.KafkaAddrs(), s.ClientCredential(t, "lanes"), false, kgo.WithHooks(hook), kgo.ConsumerGroup("lanes"),
		kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.ServerSideBalancer())
	seen := map[string]int{}
	for _, r := range pollN(t, cl, 40) {
		seen[fmt.Sprintf("%d/%d", r.Partition, r.Offset)]++
	}
	if len(seen) != 40 {
		t.Fatalf("read %d distinct records of 40: %v", len(seen), seen)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(fetchesByNode) != 4 {
		t.Fatalf("Fetches by node id %v, want some through each of the 4 lanes (nodes 0-3)", fetchesByNode)
	}
	for id := range fetchesByNode {
		if id < 0 || id > 3 {
			t.Fatalf("Fetches by node id %v: node %d is no lane of gateway 0", fetchesByNode, id)
		}
	}
	if n := grepCount(gatewayMetrics(t, s, 0), "capgate_gateway_kafka_connections"); n < 4 {
		t.Fatalf("%v open Kafka connections, want at least one per lane", n)
	}
}

// brokerReadHook calls f for every response kgo reads.
type brokerReadHook func(meta kgo.BrokerMetadata, key int16)

func (h brokerReadHook) OnBrokerRead(meta kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err == nil {
		h(meta, key)
	}
}
