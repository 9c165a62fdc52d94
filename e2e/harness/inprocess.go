package harness

import (
	"context"
	"net"
	"testing"

	"go.uber.org/zap"

	"github.com/capgate/capgate/coordinator"
)

// RunCoordinator starts an in-process coordinator on a free loopback port
// with the given config and broker, and returns it with stop, which closes
// it and returns Run's result. Callers register stop with their own
// cleanup (after closing their HTTP clients' idle connections).
func RunCoordinator(tb testing.TB, cfg coordinator.Config, log *zap.Logger, b coordinator.Broker) (*coordinator.Coordinator, func() error) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	c, err := coordinator.New(cfg, log, coordinator.WithListener(ln), coordinator.WithBroker(b))
	if err != nil {
		tb.Fatalf("coordinator: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(context.Background()) }()
	return c, func() error {
		_ = c.Close()
		return <-done
	}
}
