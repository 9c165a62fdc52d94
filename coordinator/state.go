package coordinator

import (
	"context"
	"fmt"

	"github.com/capgate/capgate/broker"
	"github.com/capgate/capgate/store"
)

// openStore opens the durable state config.state names: badger in
// data_dir, or the Kafka log — shard 0 of kafka_state.topic on the broker
// section's cluster, this coordinator its only writer. Opening the log is
// the takeover sequence: fence any earlier writer of the shard, read the
// log to its end, then serve; a coordinator deposed later fails its next
// persist with store.ErrFenced and fails closed.
func (c *Coordinator) openStore() (store.Backend, error) {
	if c.cfg.State != StateKafka {
		return store.Open(c.cfg.DataDir, store.Options{Logger: c.log})
	}
	client, err := broker.ClientOpts(c.cfg.Broker, c.log)
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	opts, err := c.cfg.KafkaState.Options(client, c.cfg.Cluster, c.cfg.ID, 0, c.log.Named("state"))
	if err != nil {
		return nil, err
	}
	return store.OpenKafka(context.Background(), opts)
}
