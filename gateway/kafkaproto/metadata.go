package kafkaproto

// Behavior: Metadata v1–v12.
//
//   - The gateways are the brokers. A connection authenticated with a
//     partition capability sees every gateway in kafka_peers, its
//     partitions spread evenly over them (any gateway serves any
//     partition: the capability is checked wherever it is used). A
//     connection authenticated with a client credential sees only the
//     gateway it is connected to (as its fetch lanes, below), leading
//     every partition and coordinating every group: a Kafka Fetch carries
//     no member identity, so the gateway that runs a member's capgate
//     session must be the one its fetches reach. Clients spread over the gateways by whichever one
//     they bootstrap from, and move to another when theirs goes away.
//   - Fetch lanes: to a client-credential connection the gateway is
//     kafka_fetch_lanes brokers (node ids self + j × peers), lane j at
//     its own port (server.go, listen), the partitions spread over them.
//     A Kafka client keeps one Fetch in flight per broker; behind one
//     node id, a member of 4 partitions on 3 Kafka brokers fetched one
//     Fetch at a time and read 0.47× what it read straight from Kafka
//     (three Fetches in flight), with 3 lanes 0.78× (BENCHMARKS.md §8).
//     Any lane serves any partition; the member is found by the client,
//     not the connection (admit.go), so lanes change nothing about who
//     may read.
//   - Topics: a capability sees its own topic; a client credential the
//     non-internal topics its tps claim allows, none once it is denied or
//     expired — with every partition, whether or not it may produce:
//     Kafka's model (Read implies Describe), a write is refused at
//     Produce with TOPIC_AUTHORIZATION_FAILED (librdkafka then logs
//     "partition count changed from N to 0": it marks the topic failed on
//     that error, not on a Metadata answer;
//     TestKcatConsumeOnlyProduceIsRefusedAtProduce). Others answer
//     TOPIC_AUTHORIZATION_FAILED when named, and are left out when all
//     topics are asked for. Topics are never auto-created; a named topic
//     Kafka does not have is logged (missingtopics.go: a kgo consumer of
//     it waits, saying so only in its own log, if it has one, at info).
//   - Leader epochs are -1 (unknown), replicas and ISR the leader alone;
//     topic ids are Kafka's (KIP-848 assignments name topics by id).
//   - An answer of 16 KiB or more (holdMin: ~600 partitions) is sent only
//     while the connection's holder has room among the answers held
//     (answerRoom, as the admin reads ask), else the connection closes
//     unanswered (logged within refusallog's bound; a Kafka client
//     reconnects and asks again, as after a broker going away): ~26
//     bytes a partition, a credential seeing ~100,000 partitions is
//     answered ~3 MB for a 20-byte request, and its unread connections
//     (256 of a tenant) held ~770 MB, every tenant's fetches 503 past
//     max_answer_bytes_held (redteam19's recommendation 1). Now one
//     answer past its holder's cap at most, per connection asking at
//     once.

import (
	"hash/fnv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/api"
)

func handleMetadata(c *conn, _ header, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	c.askRoom = true // a large answer asks for room among the answers held (conn.write)
	for _, n := range c.brokers() {
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = n.id, n.host, n.port
		resp.Brokers = append(resp.Brokers, b)
	}
	if c.s.cfg.ClusterID != nil {
		id := c.s.cfg.ClusterID()
		resp.ClusterID = &id
	}
	resp.ControllerID = c.s.nodes[c.s.self].id
	topics, byID, err := c.s.topics.get(c.ctx, true)
	if err != nil {
		topics = nil // answer every named topic LEADER_NOT_AVAILABLE below
	}
	// A denied or expired credential sees no topic (its SASL session
	// lives on, its rights do not).
	refused := !c.principal.capability() && c.checkClient(time.Now()) == api.CodeForbidden
	if req.Topics == nil {
		for name, ti := range topics {
			if !refused && c.sees(name, ti) {
				resp.Topics = append(resp.Topics, c.metadataTopic(name, ti))
			}
		}
		return resp, nil
	}
	var missing []string
	for _, rt := range req.Topics {
		name := ""
		if rt.Topic != nil {
			name = *rt.Topic
		} else {
			name = byID[rt.TopicID]
		}
		t := c.namedTopic(name, rt.TopicID, topics, err != nil, refused)
		if t.ErrorCode == kerr.UnknownTopicOrPartition.Code && rt.Topic != nil {
			missing = append(missing, name)
		}
		resp.Topics = append(resp.Topics, t)
	}
	if len(missing) > 0 {
		c.sayMissingTopics("kafka client asked for topics Kafka does not have (answered UNKNOWN_TOPIC_OR_PARTITION): "+
			"a consumer subscribed to them waits, joining no group, until they are created; correct the name, or create the topic", "", missing)
	}
	return resp, nil
}

// namedTopic answers one topic the request named.
func (c *conn) namedTopic(name string, id [16]byte, topics map[string]topicInfo, unavailable, refused bool) kmsg.MetadataResponseTopic {
	ti, known := topics[name]
	t := kmsg.NewMetadataResponseTopic()
	t.Topic, t.TopicID = kmsg.StringPtr(name), id
	switch {
	case refused:
		t.ErrorCode = kerr.TopicAuthorizationFailed.Code
	case unavailable:
		t.ErrorCode = kerr.LeaderNotAvailable.Code
	case !c.sees(name, ti):
		t.ErrorCode = kerr.TopicAuthorizationFailed.Code
	case !known:
		t.ErrorCode = kerr.UnknownTopicOrPartition.Code
	default:
		return c.metadataTopic(name, ti)
	}
	return t
}

func (c *conn) metadataTopic(name string, ti topicInfo) kmsg.MetadataResponseTopic {
	t := kmsg.NewMetadataResponseTopic()
	t.Topic, t.TopicID, t.IsInternal = kmsg.StringPtr(name), ti.id, ti.internal
	t.Partitions = make([]kmsg.MetadataResponseTopicPartition, ti.partitions)
	for i := range t.Partitions {
		p := kmsg.NewMetadataResponseTopicPartition()
		p.Partition = int32(i)
		p.Leader = c.leader(name, int32(i)).id
		p.LeaderEpoch = -1
		p.Replicas = []int32{p.Leader}
		p.ISR = []int32{p.Leader}
		t.Partitions[i] = p
	}
	return t
}

// sees reports whether the principal's claims let it see topic.
func (c *conn) sees(topic string, ti topicInfo) bool {
	p := c.principal
	if p.capability() {
		return p.Claims.Topic == topic
	}
	return !ti.internal && !c.s.internalTopic(topic) && p.Claims.AllowsTopic(topic)
}

// brokers are the gateways this connection is told about.
func (c *conn) brokers() []node {
	if c.principal.capability() {
		return c.s.nodes
	}
	return c.s.lanes
}

// leader is the gateway (or lane) advertised as leading topic/partition.
func (c *conn) leader(topic string, partition int32) node {
	nodes := c.brokers()
	if len(nodes) == 1 {
		return nodes[0]
	}
	h := fnv.New32a()
	h.Write([]byte(topic))
	return nodes[(h.Sum32()+uint32(partition))%uint32(len(nodes))]
}
