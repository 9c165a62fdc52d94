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
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/capgate/capgate/config"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/gateway"
	"github.com/capgate/capgate/internal/stack"
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
	kafkaAddr       string
	logLevel        string
	demo            bool
	tls             bool
	demoDuration    time.Duration
	demoTolerance   time.Duration
	replicas        int
	killLeader      time.Duration
	topics          []string
}

func newDevCmd() *cobra.Command {
	f := devFlags{}
	cmd := &cobra.Command{
		Use:   "dev [--demo]",
		Short: "Run an embedded Kafka, a coordinator and a gateway on loopback, with a demo topic and credentials",
		Long: "Runs everything capgate needs in one process, on loopback: an embedded Kafka\n" +
			"(franz-go's kfake) with a topic \"demo\" of 12 partitions and each --topic, a\n" +
			"coordinator and a gateway. Credentials are written to DATA-DIR/credentials.json\n" +
			"(mode 0600) and reused on restart, as are the records and the coordinator's\n" +
			"state: one coordinator's in DATA-DIR/coordinator, the replicas' (--replicas) in\n" +
			"the embedded Kafka with DATA-DIR/state.kek. A start finding only the other mode's\n" +
			"state is refused (it would start empty); it says which flag uses it.\n\n" +
			"With --demo it also runs a producer and 3 consumers, adds a 4th once they are\n" +
			"steady, prints each handoff and a summary, and exits non-zero when a record was\n" +
			"lost or repeated, a partition that did not move changed holder or epoch, or a\n" +
			"moved one did not change hands once under a higher epoch. Pauses beyond the\n" +
			"targets are warnings: timing depends on the machine, the verdict does not.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.demo && !cmd.Flags().Changed("log-level") {
				f.logLevel = "warn" // the timeline is the output
				if f.killLeader > 0 {
					f.logLevel = "error" // clients warn at every call the stopped leader misses
				}
			}
			return runDev(cmd.Context(), cmd.OutOrStdout(), f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.dataDir, "data-dir", "./capgate-data", "directory for records, coordinator state and credentials.json (kept across restarts)")
	fl.StringVar(&f.brokerAddr, "broker-addr", "127.0.0.1:9092", "embedded Kafka listen address (loopback; port 0 picks a free port)")
	fl.StringVar(&f.coordinatorAddr, "coordinator-addr", "127.0.0.1:7070", "coordinator listen address (port 0 picks a free port)")
	fl.StringVar(&f.gatewayAddr, "gateway-addr", "127.0.0.1:8080", "gateway listen address (port 0 picks a free port)")
	fl.StringVar(&f.kafkaAddr, "kafka-addr", "127.0.0.1:9093", "the gateway's Kafka listener address, for unmodified Kafka clients; its fetch lanes take the next 3 ports (port 0 picks free ports)")
	fl.StringVar(&f.logLevel, "log-level", "info", "log level of the console logs on stderr: debug, info, warn, error (warn with --demo)")
	fl.BoolVar(&f.tls, "tls", false, "serve TLS: a throwaway CA and certificates in DATA-DIR/tls (keys 0600), the CA path in credentials.env as CAPGATE_CACERT; the gateway syncs with a client certificate")
	fl.BoolVar(&f.demo, "demo", false, "also run a producer and consumers, add a consumer, print the handoff timeline and a summary, then exit (the stack and its console stop with it: see --demo-duration)")
	fl.DurationVar(&f.demoDuration, "demo-duration", 15*time.Second, "how long --demo runs; the whole stack, console included, stops when it ends")
	fl.DurationVar(&f.demoTolerance, "demo-tolerance", 50*time.Millisecond, "how far beyond the steady-state gap an unmoved partition may pause before --demo warns (timing is reported, not judged: the verdict rests on epochs)")
	fl.IntVar(&f.replicas, "replicas", 0, "run this many coordinator replicas with the state in the embedded Kafka (state: kafka; one leads, the others follow and take over); 0: one coordinator on badger")
	fl.StringArrayVar(&f.topics, "topic", nil, "another topic to create in the embedded Kafka, NAME or NAME:PARTITIONS (12 unless given; repeatable: --topic orders:6 --topic audit); one the data dir's Kafka has keeps its partitions")
	fl.DurationVar(&f.killLeader, "kill-leader", 0, "with --demo and --replicas >= 2: stop the leading coordinator this long after the demo starts and show the takeover (0: never)")
	return cmd
}

// runDev starts the stack, prints how to use it, and runs until ctx ends
// (or, with --demo, until the demo is over).
func runDev(ctx context.Context, out io.Writer, f devFlags) error {
	if f.demo && f.demoDuration < 6*time.Second {
		return usageErrorf("--demo-duration: must be >= 6s, got %s", f.demoDuration)
	}
	if err := f.validateReplicas(); err != nil {
		return err
	}
	if err := f.checkAddresses(); err != nil {
		return err
	}
	if _, err := f.devTopics(); err != nil {
		return err
	}
	if err := f.checkPortsApart(); err != nil {
		return err
	}
	log, err := newLogger(logConfig{Level: f.logLevel, Format: "console"})
	if err != nil {
		return usageErrorf("--log-level: %w", err)
	}
	defer log.Sync()
	dev, err := startDev(ctx, f, log)
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%w\n(is another capgate dev running? pick other ports, or port 0 for free ones: --broker-addr 127.0.0.1:0 ...)", err)
	}
	if err != nil {
		return err
	}
	var demoFor time.Duration
	if f.demo {
		demoFor = f.demoDuration
	}
	printDevBanner(out, dev, demoFor)
	var runErr error
	if f.demo {
		runErr = runDemo(ctx, out, demoConfig{
			Stack: dev.Stack, Credential: dev.creds.ClientCredential, TLS: dev.clientTLS,
			Topic: devTopic, Partitions: devPartitions, Group: "demo",
			Duration: f.demoDuration, Tolerance: f.demoTolerance, Log: log, KillLeaderAfter: f.killLeader,
		})
	} else {
		<-ctx.Done()
		fmt.Fprintln(out, "\nstopping capgate dev")
	}
	return errors.Join(runErr, dev.Close())
}

// devStack is the running broker, coordinator and gateway (stack.Stack,
// the same builder as the end-to-end suites and the benchmarks), the dev
// credentials, and what clients of the stack use (the CA with --tls).
type devStack struct {
	*stack.Stack
	dataDir   string
	leaderURL string // the coordinator, or the replica that led at start
	creds     devCredentials
	clientTLS tlsconf.ClientConfig
	topics    map[string]int32 // what the embedded Kafka holds (devtopics.go)
	unlock    func()           // drops the data dir's lock (devlock.go)
}

// Close stops the stack, then lets another capgate dev have the data dir.
func (d *devStack) Close() error {
	var err error
	if d.Stack != nil {
		err = d.Stack.Close()
	}
	if d.unlock != nil {
		d.unlock()
		d.unlock = nil
	}
	return err
}

// startDev starts the broker, the coordinator and the gateway on the
// flags' addresses with the shipped defaults (TLS on both listeners with
// --tls), keeps or mints the client credential, and writes the credential
// files. On error, whatever started is stopped again.
func startDev(ctx context.Context, f devFlags, log *zap.Logger) (*devStack, error) {
	if err := os.MkdirAll(f.dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("dev: data dir: %w", err)
	}
	unlock, err := lockDevDir(f.dataDir)
	if err != nil {
		return nil, err
	}
	dev := &devStack{dataDir: f.dataDir, unlock: unlock}
	defer func() {
		if dev.Stack == nil { // not started: nobody else will close it
			dev.Close()
		}
	}()
	// The records are the dev's own: kafka/ is the owner's alone, as
	// coordinator/ is (kfake makes its directories 0755; an existing
	// kafka/ from an earlier version is narrowed).
	kafkaDir := filepath.Join(f.dataDir, "kafka")
	if err := os.MkdirAll(kafkaDir, 0o700); err != nil {
		return nil, fmt.Errorf("dev: data dir: %w", err)
	}
	if err := os.Chmod(kafkaDir, 0o700); err != nil {
		return nil, fmt.Errorf("dev: data dir: %w", err)
	}
	note, err := checkDevStateMode(f.dataDir, f.replicas)
	if err != nil {
		return nil, err
	}
	if note != "" {
		log.Warn(note)
	}
	creds, err := loadOrMakeCredentials(f.dataDir)
	if err != nil {
		return nil, err
	}
	dev.creds = creds
	port, err := loopbackPort(f.brokerAddr)
	if err != nil {
		return nil, fmt.Errorf("--broker-addr: %w", err)
	}
	topics, err := f.devTopics()
	if err != nil {
		return nil, err
	}
	dev.topics = topics
	opts := stack.Options{
		Dir: f.dataDir, Topics: topics, KafkaPort: port, KafkaDataDir: kafkaDir,
		Gateways: 1, CoordinatorListen: f.coordinatorAddr, GatewayListen: []string{f.gatewayAddr},
		AdminToken: creds.AdminToken, SyncToken: creds.SyncToken,
		Coordinators: max(f.replicas, 1), KafkaState: f.replicas > 0,
		Gateway: func(_ int, cfg *gateway.Config) { cfg.ID, cfg.KafkaListen = devGatewayName, f.kafkaAddr },
		Logger:  func(part string) *zap.Logger { return log.Named(strings.TrimSuffix(part, "-1")) },
	}
	if f.tls {
		if err := dev.useTLS(&opts); err != nil {
			return nil, err
		}
	}
	if dev.Stack, err = stack.Start(ctx, opts); err != nil {
		return nil, fmt.Errorf("dev: %w", err)
	}
	dev.topics = kafkaTopics(ctx, dev.Broker, topics, log)
	if err := dev.credentials(ctx, log); err != nil {
		return nil, errors.Join(err, dev.Close())
	}
	return dev, nil
}

// useTLS makes (or keeps) the dev PKI and serves both listeners with it;
// the stack's own client trusts its CA.
func (d *devStack) useTLS(opts *stack.Options) error {
	pki, err := ensureDevPKI(d.dataDir, time.Now())
	if err != nil {
		return err
	}
	d.clientTLS = pki.client()
	tc, err := d.clientTLS.TLS(nil)
	if err != nil {
		return fmt.Errorf("dev: %w", err)
	}
	opts.Scheme = "https"
	opts.HTTP = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
	opts.Coordinator = func(_ int, cfg *coordinator.Config) { pki.apply(cfg, new(gateway.Config)) }
	gatewayBase := opts.Gateway
	opts.Gateway = func(i int, cfg *gateway.Config) {
		gatewayBase(i, cfg)
		pki.apply(new(coordinator.Config), cfg)
	}
	return nil
}

// credentials keeps or mints the client credential and writes
// credentials.json and credentials.env.
func (d *devStack) credentials(ctx context.Context, log *zap.Logger) error {
	co, err := d.WaitLeader(ctx) // the first coordinator, or the leading replica
	if err != nil {
		return fmt.Errorf("dev: %w", err)
	}
	d.leaderURL = co.URL
	had := d.creds.ClientCredential != ""
	why, err := ensureClientCredential(ctx, co.InProcess(), co.Config(), d.HTTP(), co.URL, &d.creds)
	if err != nil {
		return err
	}
	file := zap.String("file", filepath.Join(d.dataDir, credentialsFile))
	switch {
	case why != "" && had:
		// `admin rotate-keys` twice retires the key that signed it: every
		// shell that sourced credentials.env holds a dead credential.
		log.Warn("replaced the stored client credential ("+why+") with a new one for any group and topic: shells that sourced "+
			credentialsEnvFile+" still hold the old one in "+envCredential+"; source it again: . "+filepath.Join(d.dataDir, credentialsEnvFile), file)
	case why != "":
		log.Info("minted a client credential for any group and topic", file)
	}
	return saveCredentials(d.dataDir, d.creds, d.env())
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

// checkAddresses refuses a listen flag that is no host:port before
// anything starts, with what to write: --coordinator-addr 7071 started
// the embedded Kafka, then failed exit 1 "stack: listen address "7071":
// address 7071: missing port in address", naming neither the flag nor
// the fix (newuser10).
func (f devFlags) checkAddresses() error {
	for _, l := range []struct{ flag, addr string }{
		{"--broker-addr", f.brokerAddr}, {"--coordinator-addr", f.coordinatorAddr},
		{"--gateway-addr", f.gatewayAddr}, {"--kafka-addr", f.kafkaAddr},
	} {
		_, p, err := net.SplitHostPort(l.addr)
		port, perr := strconv.Atoi(p)
		if err != nil || perr != nil || port < 0 || port > 65535 {
			return usageErrorf("%s %q: want host:port (port 0 picks a free one)%s", l.flag, l.addr, config.ListenHint(l.addr))
		}
	}
	return nil
}

// checkPortsApart refuses listen addresses of capgate dev's own that take
// one port twice: --kafka-addr 127.0.0.1:9092 failed "address already in
// use … is another capgate dev running?" against its own embedded Kafka
// (newuser5), and the Kafka listener's fetch lanes take the next 3 ports.
func (f devFlags) checkPortsApart() error {
	lanes := gateway.DefaultConfig().KafkaFetchLanes // capgate dev's gateway keeps the default
	type listener struct {
		flag, addr string
		host       string
		first, n   int
	}
	var ls []listener
	for _, l := range []struct {
		flag, addr string
		n          int
	}{{"--broker-addr", f.brokerAddr, 1}, {"--coordinator-addr", f.coordinatorAddr, 1}, {"--gateway-addr", f.gatewayAddr, 1}, {"--kafka-addr", f.kafkaAddr, lanes}} {
		host, p, err := net.SplitHostPort(l.addr)
		port, perr := strconv.Atoi(p)
		if err != nil || perr != nil || port == 0 {
			continue // port 0 picks a free one; a bad address is refused where it is used
		}
		ls = append(ls, listener{l.flag, l.addr, host, port, l.n})
	}
	for i, a := range ls {
		for _, b := range ls[:i] {
			sameHost := a.host == b.host || net.ParseIP(a.host).IsUnspecified() || net.ParseIP(b.host).IsUnspecified() || a.host == "" || b.host == ""
			if sameHost && a.first < b.first+b.n && b.first < a.first+a.n {
				why := ""
				if a.n > 1 || b.n > 1 {
					why = fmt.Sprintf(" (--kafka-addr takes its port and the next %d, the Kafka listener's fetch lanes)", lanes-1)
				}
				return usageErrorf("%s %s and %s %s take the same port%s: pick other ports, or port 0 for free ones", b.flag, b.addr, a.flag, a.addr, why)
			}
		}
	}
	return nil
}

// validateReplicas checks --replicas and --kill-leader.
func (f devFlags) validateReplicas() error {
	switch {
	case f.replicas < 0 || f.replicas > 9:
		return usageErrorf("--replicas: must be within [0, 9], got %d", f.replicas)
	case f.killLeader < 0:
		return usageErrorf("--kill-leader: must be >= 0, got %s", f.killLeader)
	case f.killLeader > 0 && (!f.demo || f.replicas < 2):
		return usageErrorf("--kill-leader: needs --demo and --replicas 2 or more (someone must take over)")
	case f.killLeader > 0 && f.killLeader >= f.demoDuration-demoDrain:
		return usageErrorf("--kill-leader: %s is past the demo's end (--demo-duration %s)", f.killLeader, f.demoDuration)
	}
	return nil
}

// coordinatorList is what clients are pointed at: the coordinator, or
// every replica comma-separated (they follow not_leader).
func (d *devStack) coordinatorList() string {
	if len(d.Coordinators()) > 1 {
		return strings.Join(d.CoordinatorURLs(), ",")
	}
	return d.CoordinatorURL()
}
