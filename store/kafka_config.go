package store

import (
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/capgate/capgate/ocap"
)

// KafkaConfig is the coordinator's kafka_state section: where the Kafka
// log backend keeps the machine's records (coordinator.state: kafka).
type KafkaConfig struct {
	// Topic is the state topic (cleanup.policy=compact, created if
	// missing); SnapshotTopic holds snapshots ("" = Topic + "-snapshots").
	// Both belong in the reserved name space ocap.StateTopicPrefix
	// ("capgate-state...": capgate-state-prod, capgate-state-staging),
	// which no capgate deployment grants to any client; a name outside it
	// is accepted (a deployment from before the name space keeps its log)
	// but warned at every start (UnreservedTopics): other deployments on
	// the same Kafka do not know it and grant it to any-topic credentials.
	Topic         string `yaml:"topic"`
	SnapshotTopic string `yaml:"snapshot_topic"`
	// Partitions of both topics: one per shard.
	Partitions int32 `yaml:"partitions"`
	// ReplicationFactor of the topics when created; -1 = the brokers'
	// default.replication.factor. Production: 3.
	ReplicationFactor int16 `yaml:"replication_factor"`
	// TransactionalIDPrefix: shard n is written as transactional.id
	// prefix + "-shard-" + n ("" = "capgate-" + cluster). Every replica of
	// one cluster must use the same, and no other cluster may.
	TransactionalIDPrefix string `yaml:"transactional_id_prefix"`
	// KEKFile (mode 0600) or KEKEnv (the name of an environment variable)
	// holds the key-encryption key that wraps the signing key ring: 32
	// bytes, base64 or hex (`capgate keys kek` makes one). Exactly one is
	// required: private keys never reach Kafka in plaintext.
	KEKFile string `yaml:"kek_file"`
	KEKEnv  string `yaml:"kek_env"`
	// SnapshotEvery writes a snapshot after this many records; 0 = never
	// (replay then reads the whole compacted topic).
	SnapshotEvery int `yaml:"snapshot_every"`
	// Timeout bounds one log operation (a transaction, opening).
	Timeout time.Duration `yaml:"timeout"`
	// TransactionTimeout: how long the brokers keep a crashed writer's
	// transaction open (a takeover aborts it at once).
	TransactionTimeout time.Duration `yaml:"transaction_timeout"`
	// TombstoneRetention is delete.retention.ms of a created state topic;
	// snapshots older than half of it are not trusted.
	TombstoneRetention time.Duration `yaml:"tombstone_retention"`
	// SnapshotRetention is retention.ms of a created snapshot topic.
	SnapshotRetention time.Duration `yaml:"snapshot_retention"`
}

// DefaultKafkaConfig returns the documented defaults.
func DefaultKafkaConfig() KafkaConfig {
	return KafkaConfig{
		Topic:              "capgate-state",
		Partitions:         1,
		ReplicationFactor:  -1,
		SnapshotEvery:      10000,
		Timeout:            10 * time.Second,
		TransactionTimeout: 30 * time.Second,
		TombstoneRetention: 24 * time.Hour,
		SnapshotRetention:  7 * 24 * time.Hour,
	}
}

// Topics are the topics the state lives in: the state topic and the
// snapshot topic. No client is ever granted them (coordinator/join_topics.go).
func (c KafkaConfig) Topics() []string {
	snapshots := c.SnapshotTopic
	if snapshots == "" {
		snapshots = c.Topic + "-snapshots"
	}
	return []string{c.Topic, snapshots}
}

// UnreservedTopics are the state topics (Topics) named outside the
// reserved name space ocap.StateTopicPrefix: only this deployment knows
// not to grant them.
func (c KafkaConfig) UnreservedTopics() []string {
	var out []string
	for _, topic := range c.Topics() {
		if !ocap.StateTopic(topic) {
			out = append(out, topic)
		}
	}
	return out
}

// warnUnreserved logs, loudly, state topics named outside the reserved
// name space: the deployment starts (its log keeps its name), but every
// other capgate deployment on this Kafka grants them to a credential for
// any topic.
func (c KafkaConfig) warnUnreserved(log *zap.Logger) {
	unreserved := c.UnreservedTopics()
	if len(unreserved) == 0 || log == nil {
		return
	}
	log.Warn("kafka_state: state topics named outside capgate's reserved name space "+ocap.StateTopicPrefix+"*: "+
		"this deployment never grants them, but any other capgate deployment on this Kafka does, to a credential for any topic "+
		"(every group, member id and committed offset of this one); name them "+ocap.StateTopicPrefix+"-<deployment> "+
		"(a new log: see README, Several deployments on one Kafka), or give the other deployments' credentials explicit topic lists",
		zap.Strings("topics", unreserved), zap.String("reserved_prefix", ocap.StateTopicPrefix))
}

// Kafka's topic name rule.
var topicName = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// Validate reports the first bad setting, naming it ("kafka_state.topic").
func (c KafkaConfig) Validate() error {
	switch {
	case !topicName.MatchString(c.Topic):
		return fmt.Errorf("kafka_state.topic: must be 1-249 of [a-zA-Z0-9._-], got %q", c.Topic)
	case c.SnapshotTopic != "" && !topicName.MatchString(c.SnapshotTopic):
		return fmt.Errorf("kafka_state.snapshot_topic: must be 1-249 of [a-zA-Z0-9._-], got %q", c.SnapshotTopic)
	case c.SnapshotTopic == c.Topic:
		return fmt.Errorf("kafka_state.snapshot_topic: must differ from topic %q", c.Topic)
	case c.Partitions < 1 || c.Partitions > 10000:
		return fmt.Errorf("kafka_state.partitions: must be within [1, 10000], got %d", c.Partitions)
	case c.ReplicationFactor == 0 || c.ReplicationFactor < -1:
		return fmt.Errorf("kafka_state.replication_factor: must be -1 (broker default) or >= 1, got %d", c.ReplicationFactor)
	case c.SnapshotEvery < 0:
		return fmt.Errorf("kafka_state.snapshot_every: must be >= 0, got %d", c.SnapshotEvery)
	}
	return c.validateDurations()
}

func (c KafkaConfig) validateDurations() error {
	for _, d := range []struct {
		name     string
		value    time.Duration
		min, max time.Duration
	}{
		{"timeout", c.Timeout, 100 * time.Millisecond, 10 * time.Minute},
		{"transaction_timeout", c.TransactionTimeout, time.Second, 15 * time.Minute},
		{"tombstone_retention", c.TombstoneRetention, time.Hour, 365 * 24 * time.Hour},
		{"snapshot_retention", c.SnapshotRetention, time.Hour, 365 * 24 * time.Hour},
	} {
		if d.value < d.min || d.value > d.max {
			return fmt.Errorf("kafka_state.%s: must be within [%s, %s], got %s", d.name, d.min, d.max, d.value)
		}
	}
	return nil
}

// ValidateKEKSource requires exactly one of kek_file and kek_env (in use
// with state: kafka).
func (c KafkaConfig) ValidateKEKSource() error {
	switch {
	case c.KEKFile != "" && c.KEKEnv != "":
		return errors.New("kafka_state: set kek_file or kek_env, not both")
	case c.KEKFile == "" && c.KEKEnv == "":
		return fmt.Errorf("kafka_state: kek_file or kek_env is required with state: kafka (%w: the key ring is never written to Kafka in plaintext)", ErrKEK)
	}
	return nil
}

// KEK loads the key-encryption key from kek_file or kek_env.
func (c KafkaConfig) KEK() (*KEK, error) {
	if err := c.ValidateKEKSource(); err != nil {
		return nil, err
	}
	if c.KEKFile != "" {
		return LoadKEKFile(c.KEKFile)
	}
	return LoadKEKEnv(c.KEKEnv)
}

// Options builds the backend options for one shard: client reaches the
// cluster (broker.ClientOpts), writer names this coordinator in commit
// records, cluster defaults the transactional id prefix and is a shared
// setting (SettingCluster: every writer of the log has the same). It
// loads the KEK and warns of state topics outside the reserved name
// space (UnreservedTopics).
func (c KafkaConfig) Options(client []kgo.Opt, cluster, writer string, shard int32, log *zap.Logger) (KafkaOptions, error) {
	kek, err := c.KEK()
	if err != nil {
		return KafkaOptions{}, err
	}
	c.warnUnreserved(log)
	prefix := c.TransactionalIDPrefix
	if prefix == "" {
		prefix = "capgate-" + cluster
	}
	return KafkaOptions{
		LogOptions: LogOptions{
			WriterID: writer, KEK: kek, SnapshotEvery: c.SnapshotEvery, Timeout: c.Timeout, Logger: log,
			Settings: map[string]string{SettingCluster: cluster},
		},
		Client: client, Topic: c.Topic, SnapshotTopic: c.SnapshotTopic,
		Shards: c.Partitions, Shard: shard, ReplicationFactor: c.ReplicationFactor,
		TransactionalIDPrefix: prefix, TransactionTimeout: c.TransactionTimeout,
		TombstoneRetention: c.TombstoneRetention, SnapshotRetention: c.SnapshotRetention,
	}, nil
}
