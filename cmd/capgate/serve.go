package main

import (
	"github.com/spf13/cobra"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/gateway"
)

func newCoordinatorCmd() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "coordinator --config capgate.yaml",
		Short: "Run the coordinator: consumer groups, capabilities, handoffs, admin API",
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(path, "coordinator")
			if err != nil {
				return err
			}
			log, err := newLogger(cfg.Log)
			if err != nil {
				return err
			}
			defer log.Sync()
			c, err := coordinator.New(cfg.Coordinator, log)
			if err != nil {
				return err
			}
			return c.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&path, "config", "", "configuration file (see config.example.yaml); settings also from CAPGATE_*")
	return cmd
}

func newGatewayCmd() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "gateway --config capgate.yaml",
		Short: "Run a gateway: capability-checked fetch and produce in front of Kafka",
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(path, "gateway")
			if err != nil {
				return err
			}
			log, err := newLogger(cfg.Log)
			if err != nil {
				return err
			}
			defer log.Sync()
			g, err := gateway.New(cfg.Gateway, log)
			if err != nil {
				return err
			}
			return g.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&path, "config", "", "configuration file (see config.example.yaml); settings also from CAPGATE_*")
	return cmd
}
