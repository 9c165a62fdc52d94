package broker

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// EmbeddedConfig configures an in-process Kafka (franz-go's kfake).
type EmbeddedConfig struct {
	// Port is the first broker's port; broker i listens on Port+i. 0 picks
	// free ports.
	Port int
	// Brokers is the number of brokers, default 1.
	Brokers int
	// Topics are created at start (topic -> partitions) unless they exist.
	Topics map[string]int32
	// DataDir, if set, persists the cluster there and reloads it on start.
	DataDir string
	// Logger receives kfake's logs (errors as errors, the rest at debug).
	Logger *zap.Logger
	// Options are extra kfake options (SASL users, TLS, broker configs).
	Options []kfake.Opt
}

// Embedded is a Kafka cluster in this process, listening on 127.0.0.1, for
// tests and `capgate dev`. Methods are safe for concurrent use.
type Embedded struct {
	cluster *kfake.Cluster
}

// StartEmbedded starts the cluster and creates cfg.Topics.
func StartEmbedded(cfg EmbeddedConfig) (*Embedded, error) {
	brokers := max(cfg.Brokers, 1)
	opts := []kfake.Opt{kfake.NumBrokers(brokers)}
	if cfg.Port != 0 {
		ports := make([]int, brokers)
		for i := range ports {
			ports[i] = cfg.Port + i
		}
		opts = append(opts, kfake.Ports(ports...))
	}
	for topic, partitions := range cfg.Topics {
		opts = append(opts, kfake.SeedTopics(partitions, topic))
	}
	if cfg.DataDir != "" {
		opts = append(opts, kfake.DataDir(cfg.DataDir))
	}
	if cfg.Logger != nil {
		opts = append(opts, kfake.WithLogger(kfakeLogger{cfg.Logger}))
	}
	opts = append(opts, cfg.Options...)
	cluster, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("broker: start embedded: %w", err)
	}
	e := &Embedded{cluster: cluster}
	if cfg.DataDir != "" && len(cfg.Topics) > 0 {
		// A reloaded cluster skips its seed topics: create missing ones.
		if err := e.ensureTopics(cfg.Topics); err != nil {
			cluster.Close()
			return nil, fmt.Errorf("broker: start embedded: %w", err)
		}
	}
	return e, nil
}

// Addrs returns the brokers' host:port, first broker first.
func (e *Embedded) Addrs() []string { return e.cluster.ListenAddrs() }

// Cluster exposes kfake for fault injection (Fault, ControlKey,
// MoveTopicPartition) in tests.
func (e *Embedded) Cluster() *kfake.Cluster { return e.cluster }

// Close stops the cluster, persisting it first when it has a DataDir.
func (e *Embedded) Close() { e.cluster.Close() }

func (e *Embedded) ensureTopics(topics map[string]int32) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.Addrs()...))
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 5000
	names := make([]string, 0, len(topics))
	for t := range topics {
		names = append(names, t)
	}
	slices.Sort(names)
	for _, t := range names {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = t, topics[t], 1
		req.Topics = append(req.Topics, rt)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kresp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("create topics: %w", err)
	}
	for _, t := range kresp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil && err != kerr.TopicAlreadyExists {
			return fmt.Errorf("create topic %s: %w", t.Topic, err)
		}
	}
	return nil
}

// kfakeLogger sends kfake's logs to zap: errors as errors, the rest (every
// request, every expected failure) at debug.
type kfakeLogger struct{ log *zap.Logger }

func (l kfakeLogger) Logf(level kfake.LogLevel, format string, args ...any) {
	switch level {
	case kfake.LogLevelError:
		l.log.Error(fmt.Sprintf(format, args...))
	default:
		if ce := l.log.Check(zap.DebugLevel, ""); ce != nil {
			ce.Message = fmt.Sprintf(format, args...)
			ce.Write()
		}
	}
}
