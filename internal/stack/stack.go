package stack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"go.uber.org/zap"

	"github.com/capgate/capgate/broker"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/gateway"
	"github.com/capgate/capgate/tlsconf"
)

// Options describe the deployment Start builds. Only Dir is required.
type Options struct {
	// Dir holds every part's data directory (Dir/coordinator, …) and a
	// process part's config file (Dir/gateway-1.yaml, …); it must outlive
	// the stack (badger never finishes closing a store whose directory
	// vanished).
	Dir string

	// Topics are created in Kafka at start (topic → partitions).
	Topics map[string]int32
	// Brokers is the number of kfake brokers (default 1); KafkaPort the
	// first one's port (0: free ports); KafkaDataDir persists the cluster
	// across restarts (capgate dev); KafkaOptions are extra kfake options
	// (broker configs such as the KIP-848 heartbeat, faults, TLS).
	Brokers      int
	KafkaPort    int
	KafkaDataDir string
	KafkaOptions []kfake.Opt
	// KafkaOnly starts Kafka alone (Kafka's own group protocols).
	KafkaOnly bool

	// Coordinators is how many coordinators to start (default 1). More
	// than one are replicas (replicas.go): they share one config and keep
	// the state in the Kafka log; one leads. KafkaState runs even one
	// coordinator that way.
	Coordinators int
	KafkaState   bool
	// Gateways is how many gateways Start starts (0 is allowed; AddGateway
	// adds more later).
	Gateways int
	// CoordinatorProcess runs `capgate coordinator` processes and
	// GatewayProcesses `capgate gateway` processes (kill -9, SIGSTOP, the
	// binaries' own startup); both need Binary.
	CoordinatorProcess bool
	GatewayProcesses   bool
	Binary             string

	// CoordinatorListen and GatewayListen[i] are listen addresses
	// (default, and port 0: a free loopback port, fixed for the stack's
	// life so that restarts come back on it).
	CoordinatorListen string
	GatewayListen     []string

	// AdminToken and SyncToken are the secrets (generated when empty).
	AdminToken, SyncToken string
	// Timing is the clock settings (zero: the shipped defaults).
	Timing Timing
	// Coordinator and Gateway edit part i's configuration last (TLS
	// listeners, limits, a gateway's sync URL through a proxy, …).
	Coordinator func(i int, cfg *coordinator.Config)
	Gateway     func(i int, cfg *gateway.Config)

	// Logger names the logger of an in-process part ("kafka",
	// "coordinator", "gateway-1", "test-broker", …); nil: none.
	Logger func(part string) *zap.Logger
	// OnLine receives every stdout and stderr line of a part process (JSON
	// logs at info).
	OnLine func(part string, line []byte)
	// Scheme of the parts' URLs ("http"; "https" once listeners have TLS)
	// and HTTP the client that probes them (default: 30s timeout).
	Scheme string
	HTTP   *http.Client
	// ClientTLS is what SDK configurations (ClientConfig) trust; PKI.Apply
	// sets it with the rest of a TLS stack.
	ClientTLS tlsconf.ClientConfig
}

func (o Options) scheme() string {
	if o.Scheme == "" {
		return "http"
	}
	return o.Scheme
}

// Stack is one capgate deployment on loopback: kfake, coordinator(s) and
// gateways, each in this process or as a process, every part real. Close
// stops it, newest part first. Methods are safe for concurrent use.
type Stack struct {
	Kafka  *broker.Embedded
	Broker *broker.Client // the stack's own Kafka client (ground truth, produce)
	// AdminToken and SyncToken are the secrets the parts accept.
	AdminToken, SyncToken string

	opts Options
	http *http.Client
	// adminHTTP follows the replicas' not_leader answers (Admin).
	adminOnce sync.Once
	adminHTTP *http.Client
	adminErr  error
	kek       string // the replicas' key-encryption key file

	mu           sync.Mutex
	coordinators []*Coordinator
	gateways     []*Gateway
	closeOnce    sync.Once
	closeErr     error
}

// Start builds the stack: Kafka, then the coordinator(s) (healthy), then
// opts.Gateways gateways (ready). On error whatever started is stopped.
func Start(ctx context.Context, opts Options) (*Stack, error) {
	if opts.Dir == "" {
		return nil, errors.New("stack: Options.Dir is required")
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("stack: %w", err)
	}
	if opts.Coordinators == 0 {
		opts.Coordinators = 1
	}
	if err := opts.Timing.Validate(); err != nil {
		return nil, err
	}
	s := &Stack{opts: opts, http: opts.HTTP, AdminToken: opts.AdminToken, SyncToken: opts.SyncToken}
	if s.http == nil {
		s.http = &http.Client{Timeout: 30 * time.Second}
	}
	if err := s.start(ctx); err != nil {
		return nil, errors.Join(err, s.Close())
	}
	return s, nil
}

func (s *Stack) start(ctx context.Context) error {
	if err := s.startKafka(); err != nil {
		return err
	}
	if s.opts.KafkaOnly {
		return nil
	}
	for _, secret := range []*string{&s.AdminToken, &s.SyncToken} {
		if *secret == "" {
			var err error
			if *secret, _, err = coordinator.GenerateSecret(); err != nil {
				return fmt.Errorf("stack: %w", err)
			}
		}
	}
	if s.opts.replicas() {
		var err error
		if s.kek, err = s.kekFile(); err != nil {
			return err
		}
	}
	// Every coordinator's address first: each replica's replica.peers
	// names all of them.
	for i := range s.opts.Coordinators {
		co, err := s.newCoordinator(i)
		if err != nil {
			return err
		}
		s.mu.Lock()
		s.coordinators = append(s.coordinators, co)
		s.mu.Unlock()
	}
	for _, co := range s.Coordinators() {
		if err := co.Start(ctx); err != nil {
			return err
		}
	}
	if s.opts.replicas() {
		if _, err := s.WaitLeader(ctx); err != nil {
			return err
		}
	}
	for range s.opts.Gateways {
		if _, err := s.AddGateway(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (s *Stack) startKafka() error {
	kafka, err := broker.StartEmbedded(broker.EmbeddedConfig{
		Port: s.opts.KafkaPort, Brokers: s.opts.Brokers, Topics: s.opts.Topics,
		DataDir: s.opts.KafkaDataDir, Logger: s.logger("kafka"), Options: s.opts.KafkaOptions,
	})
	if err != nil {
		return fmt.Errorf("stack: %w", err)
	}
	s.Kafka = kafka
	// The stack's own client is ground truth and the benchmarks' direct
	// path: every fetch a Kafka exchange, never a gateway's read-ahead.
	cfg := s.BrokerConfig()
	cfg.ReadAheadBytes = 0
	client, err := broker.New(cfg, s.logger("stack-broker"))
	if err != nil {
		return fmt.Errorf("stack: kafka client: %w", err)
	}
	s.Broker = client
	return nil
}

// AddGateway starts one more gateway and waits until it is ready.
func (s *Stack) AddGateway(ctx context.Context) (*Gateway, error) {
	g, err := s.NewGateway()
	if err != nil {
		return nil, err
	}
	if err := g.Start(ctx); err != nil {
		return g, err
	}
	return g, g.WaitReady(ctx)
}

// NewGateway adds a gateway to the stack without starting it, so its
// configuration can be adjusted first (SetCoordinatorURL); Close stops it
// once started.
func (s *Stack) NewGateway() (*Gateway, error) {
	s.mu.Lock()
	i := len(s.gateways)
	s.mu.Unlock()
	g, err := s.newGateway(i)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.gateways = append(s.gateways, g)
	s.mu.Unlock()
	return g, nil
}

// BrokerConfig is a Kafka client configuration for the stack's brokers.
func (s *Stack) BrokerConfig() broker.Config {
	cfg := broker.DefaultConfig()
	cfg.Seeds = s.Kafka.Addrs()
	return cfg
}

// Coordinator is the first coordinator.
func (s *Stack) Coordinator() *Coordinator {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.coordinators[0]
}

// Coordinators lists the coordinators, first first.
func (s *Stack) Coordinators() []*Coordinator {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Coordinator(nil), s.coordinators...)
}

// CoordinatorURL is the first coordinator's base URL; with replicas the
// leader's (the first coordinator's while none leads).
func (s *Stack) CoordinatorURL() string {
	if s.opts.replicas() {
		if co := s.Leader(context.Background()); co != nil {
			return co.URL
		}
	}
	return s.Coordinator().URL
}

// Gateways lists the gateways, first first.
func (s *Stack) Gateways() []*Gateway {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Gateway(nil), s.gateways...)
}

// GatewayURLs lists the gateways' base URLs, first first.
func (s *Stack) GatewayURLs() []string {
	var urls []string
	for _, g := range s.Gateways() {
		urls = append(urls, g.URL)
	}
	return urls
}

// Timing is the stack's clock settings.
func (s *Stack) Timing() Timing { return s.opts.Timing }

// HTTP is the stack's client for its own requests.
func (s *Stack) HTTP() *http.Client { return s.http }

// Close stops the gateways (newest first), the coordinators, then Kafka,
// and returns what went wrong; later calls return the same.
func (s *Stack) Close() error {
	s.closeOnce.Do(func() {
		var errs []error
		gateways, coordinators := s.Gateways(), s.Coordinators()
		for i := len(gateways) - 1; i >= 0; i-- {
			errs = append(errs, gateways[i].Stop())
		}
		for i := len(coordinators) - 1; i >= 0; i-- {
			errs = append(errs, coordinators[i].Stop())
		}
		s.http.CloseIdleConnections()
		if s.Broker != nil {
			s.Broker.Close()
		}
		if s.Kafka != nil {
			s.Kafka.Close()
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

func (s *Stack) logger(part string) *zap.Logger {
	if s.opts.Logger == nil {
		return zap.NewNop()
	}
	return s.opts.Logger(part)
}

func (s *Stack) lineSink(part string) func([]byte) {
	if s.opts.OnLine == nil {
		return nil
	}
	return func(line []byte) { s.opts.OnLine(part, line) }
}

func (s *Stack) get(ctx context.Context, url string) (int, error) { return getStatus(ctx, s.http, url) }
