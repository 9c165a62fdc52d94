package store_test

import (
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/store"
)

// Every bad kafka_state setting is refused with an error naming it.
func TestKafkaConfigValidate(t *testing.T) {
	if err := store.DefaultKafkaConfig().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for want, edit := range map[string]func(c *store.KafkaConfig){
		"kafka_state.topic":               func(c *store.KafkaConfig) { c.Topic = "no spaces" },
		"kafka_state.snapshot_topic":      func(c *store.KafkaConfig) { c.SnapshotTopic = c.Topic },
		"kafka_state.partitions":          func(c *store.KafkaConfig) { c.Partitions = 0 },
		"kafka_state.replication_factor":  func(c *store.KafkaConfig) { c.ReplicationFactor = 0 },
		"kafka_state.snapshot_every":      func(c *store.KafkaConfig) { c.SnapshotEvery = -1 },
		"kafka_state.timeout":             func(c *store.KafkaConfig) { c.Timeout = 0 },
		"kafka_state.transaction_timeout": func(c *store.KafkaConfig) { c.TransactionTimeout = time.Hour },
		"kafka_state.tombstone_retention": func(c *store.KafkaConfig) { c.TombstoneRetention = time.Minute },
		"kafka_state.snapshot_retention":  func(c *store.KafkaConfig) { c.SnapshotRetention = 0 },
	} {
		c := store.DefaultKafkaConfig()
		edit(&c)
		if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), want+":") {
			t.Errorf("%s: %v", want, err)
		}
	}
	c := store.DefaultKafkaConfig()
	if err := c.ValidateKEKSource(); err == nil || !strings.Contains(err.Error(), "kek_file or kek_env is required") {
		t.Errorf("no KEK source: %v", err)
	}
	c.KEKFile, c.KEKEnv = "/k", "K"
	if err := c.ValidateKEKSource(); err == nil || !strings.Contains(err.Error(), "not both") {
		t.Errorf("two KEK sources: %v", err)
	}
}
