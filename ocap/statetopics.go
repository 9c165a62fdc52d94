package ocap

import "strings"

// StateTopicPrefix begins the name of every capgate state log: the
// coordinators' kafka_state.topic and its snapshot topic are named
// "capgate-state..." (the defaults are capgate-state and
// capgate-state-snapshots; per deployment e.g. capgate-state-prod). The
// name space is reserved on every Kafka capgate runs on: no coordinator
// grants a topic in it, no gateway serves one, whichever deployment wrote
// it. A state log holds every tenant's groups, member ids, subscriptions,
// committed offsets and denials; reserving the names (rather than each
// deployment knowing its own) is what keeps one deployment's tenants out
// of another's log on a shared Kafka. It is a plain prefix, as Kafka's
// PREFIXED ACL resource pattern is, so the same rule can be written in
// Kafka's ACLs.
const StateTopicPrefix = "capgate-state"

// StateTopic reports whether topic is in capgate's reserved state-log
// name space (StateTopicPrefix).
func StateTopic(topic string) bool { return strings.HasPrefix(topic, StateTopicPrefix) }

// InternalTopic reports whether topic is one no client is ever granted,
// on any path (join, topic_pattern, admin grant and lease, attenuation,
// the gateways' fetch and produce, the Kafka listener's Metadata,
// ListOffsets and Produce): Kafka's own (KafkaInternalTopic) or a capgate
// state log of any deployment (StateTopic). A deployment whose state
// topics carry an older name outside the name space adds them itself
// (coordinator: kafka_state; gateways: learned on sync).
func InternalTopic(topic string) bool { return KafkaInternalTopic(topic) || StateTopic(topic) }
