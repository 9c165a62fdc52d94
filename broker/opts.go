package broker

import (
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// ClientOpts are the kgo options that reach the cluster cfg names — seeds,
// client id, timeouts, TLS, SASL, logging — for other franz-go clients of
// the same cluster, such as the coordinator's Kafka state log (store).
func ClientOpts(cfg Config, log *zap.Logger) ([]kgo.Opt, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = zap.NewNop()
	}
	tlsc, err := newBrokerTLS(cfg.TLS, log)
	if err != nil {
		return nil, err
	}
	return append(commonOpts(cfg, log, tlsc), kgo.SeedBrokers(cfg.Seeds...)), nil
}
