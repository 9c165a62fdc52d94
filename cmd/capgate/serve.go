package main

import (
	"context"
	"os"
	"os/signal"
	"runtime/debug"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/gateway"
)

func newCoordinatorCmd() *cobra.Command {
	return serveCmd("coordinator", "Run the coordinator: consumer groups, capabilities, handoffs, admin API",
		func(cfg fileConfig) time.Duration { return 2 * cfg.Coordinator.ShutdownTimeout },
		func(ctx context.Context, cfg fileConfig, log *zap.Logger) error {
			if limit := cfg.Coordinator.GoMemoryLimit(); limit > 0 {
				debug.SetMemoryLimit(limit) // the process is the coordinator alone
			}
			return runCoordinator(ctx, cfg.Coordinator, log)
		})
}

// runCoordinator runs one coordinator, or one replica with state: kafka,
// until ctx ends, after warning of what its config leaves unusable.
func runCoordinator(ctx context.Context, cfg coordinator.Config, log *zap.Logger) error {
	warnUnusable(cfg, log)
	if cfg.State == coordinator.StateKafka {
		// One of possibly several replicas: follow the log, lead when
		// the leadership decision says so (DESIGN §9). A KEK it cannot
		// read (missing, malformed, readable by others) refuses the
		// start: the replica would retry it every lease_timeout, alive
		// but never ready.
		if _, err := cfg.KafkaState.KEK(); err != nil {
			return err // names the file, its mode and chmod 600
		}
		r, err := coordinator.NewReplica(cfg, log)
		if err != nil {
			return err
		}
		return r.Run(ctx)
	}
	c, err := coordinator.New(cfg, log)
	if err != nil {
		return err
	}
	return c.Run(ctx)
}

// warnUnusable warns of the channels cfg lets nobody use although it is
// valid: without admin_token_hashes (config.example.yaml's []) while
// tls.admin takes a token, every admin call and console login with a
// token is refused; without sync_token_hashes while tls.sync takes one,
// no gateway ever syncs. The coordinator started without a word.
func warnUnusable(cfg coordinator.Config, log *zap.Logger) {
	if len(cfg.AdminTokenHashes) == 0 && cfg.TLS.Admin.NeedsToken() {
		log.Warn("no coordinator.admin_token_hashes: the admin API (capgate admin) and the console refuse every admin token until one is configured" +
			consoleIdPNote(cfg) + "; make a token and its hash with `capgate keys secret`")
	}
	if len(cfg.SyncTokenHashes) == 0 && cfg.TLS.Sync.NeedsToken() {
		log.Warn("no coordinator.sync_token_hashes: no gateway can sync (each stays not ready) until one is configured; make a token and its hash with `capgate keys secret`")
	}
}

// consoleIdPNote says that IdP operators (console_admins) still log in
// to the console, when an issuer names some.
func consoleIdPNote(cfg coordinator.Config) string {
	for _, is := range cfg.OIDC.Issuers {
		if len(is.ConsoleAdmins) > 0 {
			return " (IdP operators matching an issuer's console_admins still log in to the console)"
		}
	}
	return ""
}

func newGatewayCmd() *cobra.Command {
	return serveCmd("gateway", "Run a gateway: capability-checked fetch and produce in front of Kafka",
		func(fileConfig) time.Duration { return 0 }, // its shutdown bounds itself (gateway.shutdown_timeout, the leave)
		func(ctx context.Context, cfg fileConfig, log *zap.Logger) error {
			g, err := gateway.New(cfg.Gateway, log)
			if err != nil {
				return err
			}
			return g.Run(ctx)
		})
}

// serveCmd is a long-running process command: load the config section
// named section, build the logger, run until the context (SIGINT/SIGTERM)
// ends. backstop is how long a shutdown may run before the process exits
// anyway (0: no limit but a second signal; watchShutdown).
func serveCmd(section, short string, backstop func(fileConfig) time.Duration, run func(context.Context, fileConfig, *zap.Logger) error) *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   section + " --config capgate.yaml",
		Short: short,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(path, section)
			if err != nil {
				return err
			}
			log, err := newLogger(cfg.Log)
			if err != nil {
				return err
			}
			defer log.Sync()
			finished := watchShutdown(cmd.Context(), log, backstop(cfg), os.Exit)
			defer finished()
			return listenInUse(run(cmd.Context(), cfg, log), cfg, section, path)
		},
	}
	cmd.Flags().StringVar(&path, "config", "", "configuration file (see config.example.yaml); settings also from CAPGATE_*")
	return cmd
}

// watchShutdown logs the signal that ends a server command (INFO), and
// keeps the process from outliving its grace: a second SIGINT/SIGTERM
// exits at once, and so does a shutdown still running backstop after the
// first (exit code 1, after an ERROR; 0: no backstop). A coordinator's
// shutdown is bounded by its own settings (shutdown_timeout; a replica
// cut off from Kafka cuts its write in flight short); the backstop is
// what ends it before an orchestrator's SIGKILL should anything still
// wait. finished stops the watch (the command returned).
func watchShutdown(ctx context.Context, log *zap.Logger, backstop time.Duration, exit func(code int)) (finished func()) {
	end := make(chan struct{})
	go func() {
		select {
		case <-end:
			return
		case <-ctx.Done():
		}
		second := make(chan os.Signal, 1)
		signal.Notify(second, os.Interrupt, syscall.SIGTERM)
		defer signal.Stop(second)
		log.Info("signal received: shutting down; a second SIGINT/SIGTERM exits at once", zap.Duration("backstop", backstop))
		var timeout <-chan time.Time
		if backstop > 0 {
			timer := time.NewTimer(backstop)
			defer timer.Stop()
			timeout = timer.C
		}
		select {
		case <-end:
			return
		case sig := <-second:
			log.Warn("second signal: exiting without finishing the shutdown", zap.Stringer("signal", sig))
		case <-timeout:
			log.Error("the shutdown is still running after its backstop: exiting", zap.Duration("backstop", backstop))
		}
		log.Sync()
		exit(1)
	}()
	var once sync.Once
	return func() { once.Do(func() { close(end) }) }
}
