package broker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Client is capgate's connection to one Kafka cluster. It is safe for
// concurrent use.
//
// One kgo client carries metadata, ListOffsets, OffsetCommit and produce
// traffic; fetches go through per-broker pools of leased connections (see
// connPool and fetchConn) so that concurrent long polls never queue behind
// each other, nor fetches of data that is there behind long polls.
type Client struct {
	cfg          Config
	log          *zap.Logger
	kgo          *kgo.Client
	meta         *metadataCache
	fetchPools   *pools
	mergeStats   MergeStats
	ahead        *aheadCache // nil: no read-ahead
	aheadStats   AheadStats
	decompressor kgo.Decompressor

	stop      context.CancelFunc
	closeOnce sync.Once
}

// New validates cfg and builds a client. It does not dial: the first call
// that needs a broker does.
func New(cfg Config, log *zap.Logger) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = zap.NewNop()
	}
	tlsc, err := newBrokerTLS(cfg.TLS, log) // one for kgo's connections and the fetch connections
	if err != nil {
		return nil, err
	}
	common := commonOpts(cfg, log, tlsc)
	codec, err := producerCompression(cfg.ProduceCompression)
	if err != nil {
		return nil, err
	}
	mainOpts := append(append([]kgo.Opt(nil), common...),
		kgo.ProducerBatchCompression(codec),
		kgo.SeedBrokers(cfg.Seeds...),
		// kgo's own metadata serves only its producer; kgo refuses a max
		// age under its 5 s min age.
		kgo.MetadataMaxAge(max(cfg.MetadataMaxAge, 5*time.Second)),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
		kgo.ProducerBatchMaxBytes(MaxProduceBatchBytes),
		// No RecordDeliveryTimeout: kgo counts it from each record's
		// Timestamp, which a producer may set in the past. Produce bounds
		// the wait with RequestTimeout instead.
		kgo.ProduceRequestTimeout(cfg.RequestTimeout),
		kgo.RetryTimeout(cfg.RequestTimeout),
	)
	cl, err := kgo.NewClient(mainOpts...)
	if err != nil {
		return nil, fmt.Errorf("broker: new client: %w", err)
	}
	spec := newConnSpec(cfg, tlsc)
	base, stop := context.WithCancel(context.Background())
	c := &Client{
		cfg:          cfg,
		log:          log,
		kgo:          cl,
		meta:         newMetadataCache(base, cl, cfg),
		fetchPools:   newPools(cfg.FetchConnectionsPerBroker, cfg.LongPollConnectionsPerBroker, spec),
		decompressor: kgo.DefaultDecompressor(),
		stop:         stop,
	}
	c.fetchPools.mergeAfter, c.fetchPools.mergeWait, c.fetchPools.mergeStats = cfg.MergeFetchesAfter, cfg.MergeWaitMax, &c.mergeStats
	c.ahead = newAheadCache(min(cfg.ReadAheadBytes, cfg.MaxFetchBytes), cfg.ReadAheadMaxBytes, &c.aheadStats)
	log.Debug("broker client ready", zap.Object("config", cfg))
	return c, nil
}

// MaxProduceBatchBytes is the largest record batch Produce sends: Kafka's
// default max.message.bytes (1 MB plus the 12-byte batch header), which is
// also kgo's default. kgo fails a record that alone makes a larger batch
// before sending it while the same produce's other records go on to the
// broker, so callers that must be all-or-nothing (the gateway's HTTP
// produce) refuse such a record first, by this constant.
const MaxProduceBatchBytes = 1_000_012

// Close releases every connection. Calls in flight fail; Close is idempotent.
func (c *Client) Close() {
	c.closeOnce.Do(func() {
		c.stop()
		c.fetchPools.close()
		c.ahead.close()
		c.kgo.Close()
	})
}

// commonOpts are the kgo options every connection shares: identity, limits,
// TLS (tlsc, nil: plaintext), SASL and logging.
func commonOpts(cfg Config, log *zap.Logger, tlsc *brokerTLS) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.ClientID(cfg.ClientID),
		kgo.RequestTimeoutOverhead(cfg.RequestTimeout),
		kgo.DialTimeout(cfg.RequestTimeout),
		// A fetch response is MaxFetchBytes of records plus a little framing.
		kgo.BrokerMaxReadBytes(cfg.MaxFetchBytes + 1<<20),
		// Unused (we consume nothing through kgo) but validated against
		// BrokerMaxReadBytes.
		kgo.FetchMaxBytes(cfg.MaxFetchBytes),
		kgo.FetchMaxPartitionBytes(cfg.MaxFetchBytes),
		kgo.WithLogger(kgoLogger{log.Named("kgo")}),
	}
	if tlsc != nil {
		opts = append(opts, kgo.Dialer(tlsc.dialer(cfg.RequestTimeout)))
	}
	if m := saslMechanism(cfg.SASL); m != nil {
		opts = append(opts, kgo.SASL(m))
	}
	return opts
}

func saslMechanism(s SASLConfig) sasl.Mechanism {
	switch s.Mechanism {
	case SASLPlain:
		return plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism()
	case SASLScramSHA256:
		return scram.Auth{User: s.Username, Pass: s.Password}.AsSha256Mechanism()
	case SASLScramSHA512:
		return scram.Auth{User: s.Username, Pass: s.Password}.AsSha512Mechanism()
	}
	return nil
}

// kgoLogger sends kgo's logs to zap. kgo's info level narrates every
// connection, so it only shows when zap is at debug.
type kgoLogger struct{ log *zap.Logger }

func (l kgoLogger) Level() kgo.LogLevel {
	switch {
	case l.log.Core().Enabled(zapcore.DebugLevel):
		return kgo.LogLevelInfo
	case l.log.Core().Enabled(zapcore.WarnLevel):
		return kgo.LogLevelWarn
	}
	return kgo.LogLevelError
}

func (l kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	fields := make([]zap.Field, 0, len(keyvals)/2)
	for i := 0; i+1 < len(keyvals); i += 2 {
		fields = append(fields, zap.Any(fmt.Sprint(keyvals[i]), keyvals[i+1]))
	}
	switch level {
	case kgo.LogLevelError:
		l.log.Error(msg, fields...)
	case kgo.LogLevelWarn:
		l.log.Warn(msg, fields...)
	default:
		l.log.Debug(msg, fields...)
	}
}

// retryBackoff is the pause before attempt n (from 1) after a leader error.
func retryBackoff(n int) time.Duration {
	d := 10 * time.Millisecond << min(n-1, 5) // 10 ms .. 320 ms
	return d
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
