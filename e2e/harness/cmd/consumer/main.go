// Command consumer is the fault tests' consumer process: one capgate SDK
// consumer (client.NewConsumer) that prints every delivered record, every
// coordinator call, grant, revoke and commit, and every fetch as one JSON
// object per line (harness.Line) on stdout, stamped with the machine's
// monotonic clock. Each line is written as it happens, so the process can
// be killed (SIGKILL) or stopped (SIGSTOP) at any moment; SIGTERM or
// SIGINT close it gracefully (revoke, release, leave).
//
//	HARNESS_CREDENTIAL=<client credential> consumer -coordinator http://127.0.0.1:7070 \
//	    -gateways http://127.0.0.1:8080,http://127.0.0.1:8081 -group g -topic orders
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/e2e/harness"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "consumer:", err)
		os.Exit(1)
	}
}

func run() error {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var mu sync.Mutex
	enc := json.NewEncoder(os.Stdout)
	emit := func(l harness.Line) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(l) // one write per line
	}
	emit(harness.Line{T: harness.Now(), Kind: harness.LineStarted, Group: cfg.Client.Group})
	return harness.RunConsumer(ctx, cfg, nil, emit)
}

func parseFlags(args []string) (harness.ConsumerConfig, error) {
	cc := client.DefaultConfig()
	fs := flag.NewFlagSet("consumer", flag.ContinueOnError)
	var gateways, topic, logLevel string
	cfg := harness.ConsumerConfig{}
	fs.StringVar(&cc.CoordinatorURL, "coordinator", "", "coordinator base URL")
	fs.StringVar(&gateways, "gateways", "", "gateway base URLs, comma-separated")
	fs.StringVar(&cc.Group, "group", "", "consumer group")
	fs.StringVar(&topic, "topic", "", "topic to subscribe to")
	fs.StringVar(&cc.InstanceID, "instance-id", "", "static member instance id")
	fs.StringVar(&cc.ClientID, "client-id", "harness", "client id")
	fs.DurationVar(&cc.SessionTimeout, "session-timeout", cc.SessionTimeout, "session timeout")
	fs.DurationVar(&cc.HeartbeatWait, "heartbeat-wait", cc.HeartbeatWait, "heartbeat wait")
	fs.DurationVar(&cc.FetchMaxWait, "fetch-max-wait", cc.FetchMaxWait, "fetch long-poll wait")
	fs.DurationVar(&cc.RequestTimeout, "request-timeout", cc.RequestTimeout, "request timeout")
	fs.DurationVar(&cc.RevokeTimeout, "revoke-timeout", cc.RevokeTimeout, "revoke timeout")
	fs.DurationVar(&cc.CapabilityExpiryMargin, "expiry-margin", cc.CapabilityExpiryMargin, "capability expiry margin")
	fs.DurationVar(&cfg.CommitInterval, "commit-interval", 100*time.Millisecond, "commit at most this often (0: never)")
	fs.DurationVar(&cfg.CloseTimeout, "close-timeout", 10*time.Second, "bound on the graceful close")
	fs.BoolVar(&cfg.PrintSecrets, "print-secrets", false, "print capabilities and member tokens (tests only)")
	fs.BoolVar(&cfg.SyncCommit, "sync-commit", false, "commit with the synchronous Consumer.Commit (default: CommitAsync)")
	fs.StringVar(&logLevel, "log-level", "", "SDK log level on stderr (debug, info, warn); empty: none")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	cc.Gateways = strings.Split(gateways, ",")
	cc.Topics = []string{topic}
	cc.Credential = os.Getenv("HARNESS_CREDENTIAL")
	cfg.Client = cc
	if logLevel != "" {
		zc := zap.NewDevelopmentConfig()
		if err := zc.Level.UnmarshalText([]byte(logLevel)); err != nil {
			return cfg, fmt.Errorf("-log-level: %w", err)
		}
		log, err := zc.Build()
		if err != nil {
			return cfg, err
		}
		cfg.Logger = log
	}
	return cfg, cc.Validate()
}
