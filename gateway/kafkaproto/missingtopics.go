package kafkaproto

// Behavior: topics a client names that Kafka does not have.
//
//   - A KIP-848 member subscribing by name to topics of which some do
//     not exist joins with the others, as Kafka's broker assigns what
//     exists (subscribePresent); the missing ones are remembered
//     (member.awaiting) and joined as soon as the listener's topic list
//     has them (awaitedCreated, checked on each heartbeat: a client sends
//     its subscription only when it changes). Before, the coordinator
//     refused the whole join (404: unknown topic) and the client got
//     UNKNOWN_SERVER_ERROR on every attempt: a kgo consumer of "orders"
//     and a not yet created topic consumed nothing at all, where the
//     classic protocol (kgo subscribes with the topics it found) consumed
//     orders. One subscribing only to missing topics is answered
//     UNKNOWN_TOPIC_OR_PARTITION with the names (retriable: the client
//     joins again; capgate keeps no member that holds nothing).
//   - The gateway logs each (warn, missingTopicLog): the member's group,
//     client id and the missing topics; and a Metadata request naming a
//     topic Kafka does not have (a consumer subscribed to it waits,
//     joining nothing, and says so only in its own log, if it has one,
//     at info: kgo's KIP-848 and classic consumers alike). Once per client and topic
//     every missingTopicRepeat, within refusallog's bound.

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"

	"github.com/capgate/capgate/internal/refusallog"
	"github.com/capgate/capgate/ocap"
)

// missingTopicRepeat is how long a client's missing topic is not logged
// again; missingTopicSaidMax bounds the topics remembered (cleared when
// full: a client naming ever new topics logs within refusallog's bound),
// each name within 249 bytes (keptName): ~4 MB at most.
const (
	missingTopicRepeat  = 10 * time.Minute
	missingTopicSaidMax = 4096
)

// missingTopicLog logs topics clients name that Kafka does not have.
type missingTopicLog struct {
	lines *refusallog.Log
	mu    sync.Mutex
	said  map[missingTopicKey]time.Time
}

type missingTopicKey struct {
	client       clientKey
	group, topic string // group "": a Metadata request's
}

func newMissingTopicLog(log *zap.Logger) *missingTopicLog {
	return &missingTopicLog{lines: refusallog.New(log), said: map[missingTopicKey]time.Time{}}
}

// fresh is the topics of missing not logged for key and group within
// missingTopicRepeat, marked logged.
func (l *missingTopicLog) fresh(key clientKey, group string, missing []string, now time.Time) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	key.clientID = keptName(key.clientID)
	group = keptName(group)
	for _, topic := range missing {
		k := missingTopicKey{key, group, keptName(topic)}
		if at, ok := l.said[k]; ok && now.Sub(at) < missingTopicRepeat {
			continue
		}
		if len(l.said) >= missingTopicSaidMax {
			clear(l.said)
		}
		l.said[k] = now
		out = append(out, topic)
	}
	return out
}

// keptName is name as the said table keeps it: cut to Kafka's longest
// topic name, and copied, so it holds no more than that of the request
// it came in. A client's topic names, group and client.id may each be
// 32,767 bytes on the wire: 4,096 topics of 32,000 characters held
// ~131 MB for missingTopicRepeat (redteam19 #3); the log lines cut a
// client.id alike. Two longer names alike in their first 249 bytes share
// an entry: one is logged for both.
func keptName(name string) string {
	if len(name) <= 249 {
		return name
	}
	return strings.Clone(name[:249])
}

// sayMissingTopics logs msg for the topics of missing not yet logged for
// c's client and group ("": a Metadata request).
func (c *conn) sayMissingTopics(msg, group string, missing []string) {
	topics := c.s.missing.fresh(c.key(), group, missing, time.Now())
	if len(topics) == 0 {
		return
	}
	var fields []zap.Field
	if group != "" {
		fields = append(fields, zap.String("group", group))
	}
	fields = append(fields, zap.Strings("missing_topics", shownTopics(topics)), zap.String("client_id", keptName(c.clientID)),
		zap.String("remote", c.nc.RemoteAddr().String()))
	c.s.missing.lines.LineAt(time.Now(), msg, fields...)
}

// splitTopics parts names into the topics Kafka has, as the listener's
// topic list (read again when older than a second) says, and those it
// does not; all present when the list cannot be read, and those the
// connection may not see (the coordinator decides and refuses).
func (c *conn) splitTopics(names []string, refresh bool) (present, missing []string) {
	topics, _, err := c.s.topics.get(c.ctx, refresh)
	if err != nil {
		return names, nil
	}
	for _, name := range names {
		if _, ok := topics[name]; ok || !c.sees(name, topicInfo{}) {
			present = append(present, name) // one it may not see: the coordinator refuses it (403)
		} else {
			missing = append(missing, name)
		}
	}
	return present, missing
}

// subscribePresent is the subscription a KIP-848 member joins with: the
// topics of names Kafka has, and those it does not (logged for group).
// Answers UNKNOWN_TOPIC_OR_PARTITION with why when none exists.
func (c *conn) subscribePresent(group string, names []string) (present, missing []string, code int16, why string) {
	present, missing = c.splitTopics(names, true)
	if len(missing) == 0 {
		return present, nil, 0, ""
	}
	if code, why = awaitable(missing); code != 0 {
		return nil, nil, code, why
	}
	if len(present) == 0 {
		c.sayMissingTopics("kafka member subscribes only to topics Kafka does not have: answered UNKNOWN_TOPIC_OR_PARTITION "+
			"(the client joins again); create the topic or correct the name", group, missing)
		return nil, missing, kerr.UnknownTopicOrPartition.Code, missingTopicsMessage(missing)
	}
	c.sayMissingTopics("kafka member subscribes to topics Kafka does not have: its other topics are assigned, "+
		"these once they are created; correct the name if it is wrong", group, missing)
	return present, missing, 0, ""
}

// awaitedTopicsMax bounds the missing topics one member awaits (the
// coordinator's default topics_per_member: a join listing more is
// refused there too).
const awaitedTopicsMax = 1000

// awaitable refuses missing topics a member would hold for its life
// (member.awaiting) beyond what a subscription of real topics holds: a
// name that is no Kafka topic name (ocap.ValidTopic: at most 249 of
// [a-zA-Z0-9._-]) can never be created — INVALID_TOPIC_EXCEPTION, as
// Kafka answers a Metadata of one — and more than awaitedTopicsMax
// INVALID_REQUEST. ConsumerGroupHeartbeat's compact strings may be as
// long as the frame (8 MiB): 120 missing names of 32,002 characters held
// ~4 MB a member, ~10 GB at a tenant's 2,500 (TestMemberJoinsHoldBoundedText).
// The coordinator checks only the names it is sent: those Kafka has.
func awaitable(missing []string) (int16, string) {
	for _, name := range missing {
		if !ocap.ValidTopic(name) {
			return kerr.InvalidTopicException.Code, fmt.Sprintf("subscribed topic %q (%d bytes) is no Kafka topic name: a topic is %s",
				shownTopics([]string{name})[0], len(name), ocap.TopicRule)
		}
	}
	if len(missing) > awaitedTopicsMax {
		return kerr.InvalidRequest.Code, fmt.Sprintf("subscribes to %d topics Kafka does not have: at most %d are awaited", len(missing), awaitedTopicsMax)
	}
	return 0, ""
}

// fetchOutsideAGroup is the missingTopicLog group under which a client's
// Fetches outside a group are remembered (no group is named so).
const fetchOutsideAGroup = "\x00fetch"

// sayFetchOutsideAGroup logs (warn) a Fetch of topic — one its credential
// allows — by a client credential's connection that reaches no group
// member: refused TOPIC_AUTHORIZATION_FAILED, which a user takes for a
// missing ACL (kcat -C -t orders, a client's assign). Once per client
// and topic every missingTopicRepeat, within refusallog's bound.
func (c *conn) sayFetchOutsideAGroup(topic string) {
	now := time.Now()
	if len(c.s.missing.fresh(c.key(), fetchOutsideAGroup, []string{topic}, now)) == 0 {
		return
	}
	c.s.missing.lines.LineAt(now, "kafka fetch with a client credential reaching no consumer group member: answered TOPIC_AUTHORIZATION_FAILED — "+
		"a client credential reads only as a group member (kcat -G GROUP TOPIC, a client's group.id and subscribe); "+
		"to read a partition without a group, use a partition capability (capgate admin grant)",
		zap.String("topic", shownTopics([]string{topic})[0]), zap.String("client_id", keptName(c.clientID)),
		zap.String("remote", c.nc.RemoteAddr().String()))
}

// transactionsRefused is the missingTopicLog group under which a client's
// refused transactional ids are remembered.
const transactionsRefused = "\x00txn"

// sayTransactionsRefused logs (warn) a transactional producer refused
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED (FindCoordinator of a transaction
// coordinator, InitProducerId with a transactional id): KafkaJS reports
// it as "Failed to find group coordinator", which names neither
// transactions nor what to do. Once per client and transactional id
// every missingTopicRepeat, within refusallog's bound.
func (c *conn) sayTransactionsRefused(txnID string) {
	now := time.Now()
	if len(c.s.missing.fresh(c.key(), transactionsRefused, []string{txnID}, now)) == 0 {
		return
	}
	c.s.missing.lines.LineAt(now, "kafka transactional producer refused TRANSACTIONAL_ID_AUTHORIZATION_FAILED: capgate's Kafka listener "+
		"serves no transactions (one spans partitions no single capability covers); produce without transactional.id "+
		"(idempotent producers work)",
		zap.String("transactional_id", shownTopics([]string{txnID})[0]), zap.String("client_id", keptName(c.clientID)),
		zap.String("remote", c.nc.RemoteAddr().String()))
}

// missingTopicsMessage is the heartbeat's error message for missing.
func missingTopicsMessage(missing []string) string {
	names := strings.Join(shownTopics(missing), ", ")
	if len(missing) > missingTopicsShown {
		names += ", …"
	}
	return "subscribed topics Kafka does not have: " + names + " (create them, or correct the names)"
}

// missingTopicsShown bounds the names a log line or message carries, each
// cut to Kafka's longest topic name (a client may send any string).
const missingTopicsShown = 10

func shownTopics(names []string) []string {
	out := make([]string, 0, min(len(names), missingTopicsShown))
	for _, n := range names[:min(len(names), missingTopicsShown)] {
		if len(n) > 249 {
			n = n[:249]
		}
		out = append(out, n)
	}
	return out
}

// awaiting records a member's subscription by name (wanted, as the
// client sent it) of which missing are not in Kafka yet; nil missing
// clears it. Under no lock.
func (m *member) awaiting(wanted, missing []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(missing) == 0 {
		m.wanted, m.missing = nil, nil
		return
	}
	m.wanted, m.missing = slices.Clone(wanted), slices.Clone(missing)
}

// awaitedCreated is the member's whole subscription when a topic it
// waits for now exists in the listener's topic list (cached: at most
// topicCacheAge old), to join it; ok false otherwise.
func (c *conn) awaitedCreated(m *member) (wanted []string, ok bool) {
	m.mu.Lock()
	wanted, missing := slices.Clone(m.wanted), slices.Clone(m.missing)
	m.mu.Unlock()
	if len(missing) == 0 {
		return nil, false
	}
	present, _ := c.splitTopics(missing, false)
	return wanted, len(present) > 0
}
