// Command capgate runs capgate's coordinator, gateway and dev stack, and
// talks to them: consume, produce, admin, token and key tools.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRoot().ExecuteContext(ctx)
	stop()
	if err != nil {
		printError(os.Stderr, err)
		os.Exit(exitCode(err))
	}
}

// printError prints the error that ends the command. It may carry a
// server's or a token's text: escaped for the terminal (terminal.go),
// keeping only the message's own line breaks.
func printError(w io.Writer, err error) {
	fmt.Fprintln(w, "capgate:", escapeUnsafe(err.Error(), '\n'))
}
