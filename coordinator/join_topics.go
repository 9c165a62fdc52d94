package coordinator

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/group"
	"github.com/capgate/capgate/ocap"
)

// grantableTopics answers a join naming a topic no client is ever
// granted with 403 forbidden, whatever its credential allows (internalTopic);
// so is a client credential or OAuth client whose topics name one (it
// could never use it; a pattern naming only such topics, "__*", too).
// A credential for any topic ("*") covers them by its pattern; the
// metadata the groups match topic_pattern against leaves them out
// (refreshTopics), so a pattern never reaches them either.
func (c *Coordinator) grantableTopics(ctx *fasthttp.RequestCtx, topics []string) bool {
	for _, topic := range topics {
		if !c.grantableTopic(ctx, topic) {
			return false
		}
	}
	return true
}

// grantableTopic answers 403 forbidden for a topic no client is granted
// (internalTopic), naming why; every grant path asks it: join, admin
// grant and lease, attenuation.
func (c *Coordinator) grantableTopic(ctx *fasthttp.RequestCtx, topic string) bool {
	var why string
	switch {
	case ocap.KafkaInternalTopic(topic):
		why = "is Kafka's own (a name beginning with __)"
	case ocap.StateTopic(topic):
		why = "is in capgate's reserved state-log name space (" + ocap.StateTopicPrefix + "*: the state of this or another capgate deployment on this Kafka)"
	case c.ownStateTopic(topic):
		why = "holds this coordinator's state (kafka_state)"
	default:
		return true
	}
	writeError(ctx, api.CodeForbidden, "topic "+strconv.Quote(cut(topic, 249))+" "+why+": no client is granted it")
	return false
}

// internalTopic reports whether topic is one no client is granted:
// Kafka's own or a capgate state log of any deployment on this Kafka
// (ocap.InternalTopic: the reserved capgate-state* name space), or this
// coordinator's own state topics under a name outside that name space
// (kafka_state.topic set before it was reserved; warned at start).
func (c *Coordinator) internalTopic(topic string) bool {
	return ocap.InternalTopic(topic) || c.ownStateTopic(topic)
}

// ownStateTopic reports whether topic is one of this coordinator's state
// topics (kafka_state, whatever the state backend).
func (c *Coordinator) ownStateTopic(topic string) bool {
	return slices.Contains(c.cfg.KafkaState.Topics(), topic)
}

// knownTopics answers a join naming a topic Kafka does not have with 404
// not_found (unknown topic), so a mistyped --topic fails loudly instead of
// a member that holds nothing and shows lag 0 forever. Metadata is read
// from Kafka again first (a topic created since the last metadata_interval
// read is found); that read is bounded by the joins' own rate limit per
// credential. A topic_pattern may match nothing yet: it is not refused
// (topics created later that match are assigned, as Kafka's), but the
// answer says how many it matches (matchCount); nothing is checked
// before the first metadata read.
// unknownTopicsReadAt is when knownTopics last read metadata (unix ns).
type unknownTopicsReadAt = atomic.Int64

func (c *Coordinator) knownTopics(ctx *fasthttp.RequestCtx, topics []string) bool {
	if len(topics) > c.cfg.Groups.Limits.TopicsPerMember {
		return true // the machine refuses the list first (400 topics_per_member)
	}
	missing := c.missingTopic(topics)
	if missing == "" {
		return true
	}
	// One forced read a second at most, however many joins name unknown
	// topics (each would otherwise cost a full metadata read from Kafka
	// and a machine event): the others answer from the last read.
	if last := c.unknownTopicsRead.Load(); time.Since(time.Unix(0, last)) >= time.Second &&
		c.unknownTopicsRead.CompareAndSwap(last, time.Now().UnixNano()) {
		c.refreshTopics(context.Background())
	}
	if missing = c.missingTopic(topics); missing == "" {
		return true
	}
	writeError(ctx, api.CodeNotFound, "unknown topic "+strconv.Quote(missing)+": Kafka has no such topic")
	return false
}

// knownPartition answers 404 not_found for a partition Kafka does not
// have, saying which: an unknown topic (metadata read again first, as a
// join's: knownTopics), or the topic's partition count. Both were
// "unknown topic or partition" (newuser5: capgate produce -t nosuch).
// Nothing is checked before the first metadata read.
func (c *Coordinator) knownPartition(ctx *fasthttp.RequestCtx, topic string, partition int32) bool {
	if !c.knownTopics(ctx, []string{topic}) {
		return false
	}
	if n, known := c.partitionCount(topic); known && partition >= n {
		writeError(ctx, api.CodeNotFound, fmt.Sprintf("topic %q has %d partitions (0 to %d): no partition %d", topic, n, n-1, partition))
		return false
	}
	return true
}

// matchCount is a join's answer's topic_pattern_matches: how many topics
// its pattern matched (matchPattern), nil without one or before the
// first metadata read.
func (c *Coordinator) matchCount(p *group.PatternMatch) *int {
	if p == nil || c.topics.Load() == nil {
		return nil
	}
	n := p.Count()
	return &n
}

// missingTopic is the first of topics that Kafka does not have, "" when
// all exist or metadata was never read.
func (c *Coordinator) missingTopic(topics []string) string {
	for _, topic := range topics {
		if n, known := c.partitionCount(topic); known && n == 0 {
			return topic
		}
	}
	return ""
}
