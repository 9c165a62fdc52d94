// Command capgate runs capgate's coordinator, gateway and dev stack, and
// talks to them: consume, produce, admin, token and key tools.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRoot().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "capgate:", err)
		os.Exit(1)
	}
}
