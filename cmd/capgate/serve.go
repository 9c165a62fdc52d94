package main

import (
	"context"
	"runtime/debug"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/gateway"
)

func newCoordinatorCmd() *cobra.Command {
	return serveCmd("coordinator", "Run the coordinator: consumer groups, capabilities, handoffs, admin API",
		func(ctx context.Context, cfg fileConfig, log *zap.Logger) error {
			if limit := cfg.Coordinator.GoMemoryLimit(); limit > 0 {
				debug.SetMemoryLimit(limit) // the process is the coordinator alone
			}
			if cfg.Coordinator.State == coordinator.StateKafka {
				// One of possibly several replicas: follow the log, lead
				// when the leadership decision says so (DESIGN §9).
				r, err := coordinator.NewReplica(cfg.Coordinator, log)
				if err != nil {
					return err
				}
				return r.Run(ctx)
			}
			c, err := coordinator.New(cfg.Coordinator, log)
			if err != nil {
				return err
			}
			return c.Run(ctx)
		})
}

func newGatewayCmd() *cobra.Command {
	return serveCmd("gateway", "Run a gateway: capability-checked fetch and produce in front of Kafka",
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
// ends.
func serveCmd(section, short string, run func(context.Context, fileConfig, *zap.Logger) error) *cobra.Command {
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
			return run(cmd.Context(), cfg, log)
		},
	}
	cmd.Flags().StringVar(&path, "config", "", "configuration file (see config.example.yaml); settings also from CAPGATE_*")
	return cmd
}
