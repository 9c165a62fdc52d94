package kafkaclients

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestPeersSpreadPartitions: with kafka_peers, a capability connection
// sees every gateway as a broker and the partitions spread over them; a
// kgo consumer bootstrapped at one gateway fetches its partition from the
// other when that one leads it. A client-credential connection is told
// the cluster is the gateway it talks to.
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
	if c := meta(s.ClientCredential(t, "g")); len(c.Brokers) != 1 || fmt.Sprintf("%s:%d", c.Brokers[0].Host, c.Brokers[0].Port) != addrs[0] {
		t.Fatalf("client credential metadata: brokers %+v, want only %s", c.Brokers, addrs[0])
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
