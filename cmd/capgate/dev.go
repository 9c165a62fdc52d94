package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/capgate/capgate/broker"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/gateway"
	"github.com/capgate/capgate/tlsconf"
)

// The dev stack's demo topic.
const (
	devTopic      = "demo"
	devPartitions = 12
)

type devFlags struct {
	dataDir         string
	brokerAddr      string
	coordinatorAddr string
	gatewayAddr     string
	logLevel        string
	demo            bool
	tls             bool
	demoDuration    time.Duration
	demoTolerance   time.Duration
}

func newDevCmd() *cobra.Command {
	f := devFlags{}
	cmd := &cobra.Command{
		Use:   "dev [--demo]",
		Short: "Run an embedded Kafka, a coordinator and a gateway on loopback, with a demo topic and credentials",
		Long: "Runs everything capgate needs in one process, on loopback: an embedded Kafka\n" +
			"(franz-go's kfake) with a topic \"demo\" of 12 partitions, a coordinator and a\n" +
			"gateway. Credentials are written to DATA-DIR/credentials.json (mode 0600) and\n" +
			"reused on restart, as are the records and the coordinator's state.\n\n" +
			"With --demo it also runs a producer and 3 consumers, adds a 4th once they are\n" +
			"steady, prints each handoff and a summary, and exits non-zero when a record was\n" +
			"lost or repeated, or a partition that did not move paused.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.demo && !cmd.Flags().Changed("log-level") {
				f.logLevel = "warn" // the timeline is the output
			}
			return runDev(cmd.Context(), cmd.OutOrStdout(), f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.dataDir, "data-dir", "./capgate-data", "directory for records, coordinator state and credentials.json (kept across restarts)")
	fl.StringVar(&f.brokerAddr, "broker-addr", "127.0.0.1:9092", "embedded Kafka listen address (loopback; port 0 picks a free port)")
	fl.StringVar(&f.coordinatorAddr, "coordinator-addr", "127.0.0.1:7070", "coordinator listen address (port 0 picks a free port)")
	fl.StringVar(&f.gatewayAddr, "gateway-addr", "127.0.0.1:8080", "gateway listen address (port 0 picks a free port)")
	fl.StringVar(&f.logLevel, "log-level", "info", "log level of the console logs on stderr: debug, info, warn, error (warn with --demo)")
	fl.BoolVar(&f.tls, "tls", false, "serve TLS: a throwaway CA and certificates in DATA-DIR/tls (keys 0600), the CA path in credentials.env as CAPGATE_CACERT; the gateway syncs with a client certificate")
	fl.BoolVar(&f.demo, "demo", false, "also run a producer and consumers, add a consumer, print the handoff timeline and a summary, then exit")
	fl.DurationVar(&f.demoDuration, "demo-duration", 15*time.Second, "how long --demo runs")
	fl.DurationVar(&f.demoTolerance, "demo-tolerance", 50*time.Millisecond, "how far beyond the steady-state gap an unmoved partition may pause before --demo fails")
	return cmd
}

// runDev starts the stack, prints how to use it, and runs until ctx ends
// (or, with --demo, until the demo is over).
func runDev(ctx context.Context, out io.Writer, f devFlags) error {
	if f.demo && f.demoDuration < 6*time.Second {
		return fmt.Errorf("--demo-duration: must be >= 6s, got %s", f.demoDuration)
	}
	log, err := newLogger(logConfig{Level: f.logLevel, Format: "console"})
	if err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	defer log.Sync()
	stack, err := startDev(ctx, f, log)
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%w\n(is another capgate dev running? pick other ports, or port 0 for free ones: --broker-addr 127.0.0.1:0 ...)", err)
	}
	if err != nil {
		return err
	}
	printDevBanner(out, stack, f.demo)
	var runErr error
	if f.demo {
		runErr = runDemo(ctx, out, demoConfig{
			CoordinatorURL: stack.coordinatorURL, GatewayURL: stack.gatewayURL,
			Brokers: stack.broker.Addrs(), Credential: stack.creds.ClientCredential, TLS: stack.clientTLS,
			Topic: devTopic, Partitions: devPartitions, Group: "demo",
			Duration: f.demoDuration, Tolerance: f.demoTolerance, Log: log,
		})
	} else {
		<-ctx.Done()
		fmt.Fprintln(out, "\nstopping capgate dev")
	}
	return errors.Join(runErr, stack.close())
}

// devStack is the running broker, coordinator and gateway.
type devStack struct {
	log            *zap.Logger
	dataDir        string
	broker         *broker.Embedded
	coordinator    *coordinator.Coordinator
	stopCoord      context.CancelFunc
	coordDone      chan error
	gateway        *gateway.Gateway
	creds          devCredentials
	coordinatorURL string
	gatewayURL     string
	clientTLS      tlsconf.ClientConfig // what clients of the stack use (the CA with --tls)
	http           *http.Client
}

// startDev starts the broker, then the coordinator, then the gateway, and
// returns once the gateway is ready (synced). On error, whatever started
// is stopped again.
func startDev(ctx context.Context, f devFlags, log *zap.Logger) (*devStack, error) {
	s := &devStack{log: log, dataDir: f.dataDir}
	err := s.start(ctx, f)
	if err != nil {
		err = errors.Join(err, s.close())
		return nil, err
	}
	return s, nil
}

func (s *devStack) start(ctx context.Context, f devFlags) error {
	if err := os.MkdirAll(f.dataDir, 0o700); err != nil {
		return fmt.Errorf("dev: data dir: %w", err)
	}
	creds, err := loadOrMakeCredentials(f.dataDir)
	if err != nil {
		return err
	}
	s.creds = creds
	if err := s.startBroker(f.brokerAddr); err != nil {
		return err
	}
	cc, gc, err := devConfigs(f, s.broker.Addrs(), creds)
	if err != nil {
		return err
	}
	if f.tls {
		pki, err := ensureDevPKI(f.dataDir, time.Now())
		if err != nil {
			return err
		}
		pki.apply(&cc, &gc)
		s.clientTLS = pki.client()
	}
	tc, err := s.clientTLS.TLS(nil)
	if err != nil {
		return fmt.Errorf("dev: %w", err)
	}
	s.http = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
	if err := s.startCoordinator(ctx, cc); err != nil {
		return err
	}
	changed, err := ensureClientCredential(ctx, s.coordinator, cc, s.http, s.coordinatorURL, &s.creds)
	if err != nil {
		return err
	}
	if changed {
		log := s.log.Info
		if creds.ClientCredential != "" {
			log = s.log.Warn
		}
		log("minted a client credential for any group and topic", zap.String("file", filepath.Join(f.dataDir, credentialsFile)))
	}
	gc.CoordinatorURL = s.coordinatorURL
	if err := s.startGateway(ctx, gc); err != nil {
		return err
	}
	return saveCredentials(f.dataDir, s.creds, s.env())
}

func (s *devStack) startBroker(addr string) error {
	port, err := loopbackPort(addr)
	if err != nil {
		return fmt.Errorf("--broker-addr: %w", err)
	}
	s.broker, err = broker.StartEmbedded(broker.EmbeddedConfig{
		Port:    port,
		Topics:  map[string]int32{devTopic: devPartitions},
		DataDir: filepath.Join(s.dataDir, "kafka"),
		Logger:  s.log.Named("kafka"),
	})
	if err != nil {
		return fmt.Errorf("dev: %w", err)
	}
	return nil
}

// loopbackPort checks that addr is a loopback host:port (kfake listens on
// 127.0.0.1 only) and returns the port.
func loopbackPort(addr string) (int, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, fmt.Errorf("want host:port, got %q", addr)
	}
	if host != "127.0.0.1" && host != "localhost" {
		return 0, fmt.Errorf("the embedded broker listens on 127.0.0.1 only, got %q", addr)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 0 || port > 65535 {
		return 0, fmt.Errorf("want a port in [0, 65535], got %q", portText)
	}
	return port, nil
}

func (s *devStack) startCoordinator(ctx context.Context, cfg coordinator.Config) error {
	c, err := coordinator.New(cfg, s.log.Named("coordinator"))
	if err != nil {
		return fmt.Errorf("dev: %w", err)
	}
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	s.coordinator, s.stopCoord, s.coordDone = c, stop, make(chan error, 1)
	go func() { s.coordDone <- c.Run(runCtx) }()
	s.coordinatorURL = c.URL()
	return waitHTTP(ctx, s.http, s.coordinatorURL+"/healthz", 10*time.Second, s.coordDone)
}

func (s *devStack) startGateway(ctx context.Context, cfg gateway.Config) error {
	g, err := gateway.New(cfg, s.log.Named("gateway"))
	if err != nil {
		return fmt.Errorf("dev: %w", err)
	}
	if err := g.Start(); err != nil {
		g.Close()
		return fmt.Errorf("dev: %w", err)
	}
	s.gateway = g
	s.gatewayURL = g.URL()
	return waitHTTP(ctx, s.http, s.gatewayURL+"/readyz", 15*time.Second, s.coordDone)
}

// close stops the gateway, then the coordinator, then the broker (which
// persists its records on close).
func (s *devStack) close() error {
	var errs []error
	if s.gateway != nil {
		errs = append(errs, s.gateway.Close())
	}
	if s.coordinator != nil {
		s.stopCoord()
		errs = append(errs, <-s.coordDone)
	}
	if s.broker != nil {
		s.broker.Close()
	}
	return errors.Join(errs...)
}

// waitHTTP polls url until it answers 200, the deadline passes, ctx ends,
// or failed yields (a server that stopped). A value read from failed is
// put back for the stack's close.
func waitHTTP(ctx context.Context, hc *http.Client, url string, timeout time.Duration, failed chan error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if last = getOK(ctx, hc, url); last == nil {
			return nil
		}
		select {
		case err := <-failed:
			failed <- err
			return fmt.Errorf("dev: waiting for %s: server stopped: %v", url, err)
		case <-ctx.Done():
			return fmt.Errorf("dev: waiting for %s: %w (last: %v)", url, ctx.Err(), last)
		case <-tick.C:
		}
	}
}

func getOK(ctx context.Context, hc *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s", resp.Status)
	}
	return nil
}
