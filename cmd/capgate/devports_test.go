package main

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
)

// TestDevBusyPortSaysSo: `capgate dev` on a port something else holds
// fails with the address in use and the hint, whichever listener it is.
// The gateway's and its Kafka listener's said "gateway: already started"
// after 10 s of retrying: the stack retried a gateway that starts once.
func TestDevBusyPortSaysSo(t *testing.T) {
	for _, listener := range []string{"coordinator", "gateway", "kafka"} {
		t.Run(listener, func(t *testing.T) {
			held, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer held.Close()
			f := devFlags{dataDir: t.TempDir(), logLevel: "error", brokerAddr: "127.0.0.1:0",
				coordinatorAddr: "127.0.0.1:0", gatewayAddr: "127.0.0.1:0", kafkaAddr: "127.0.0.1:0"}
			*map[string]*string{"coordinator": &f.coordinatorAddr, "gateway": &f.gatewayAddr, "kafka": &f.kafkaAddr}[listener] = held.Addr().String()
			err = runDev(context.Background(), io.Discard, f)
			if err == nil {
				t.Fatal("capgate dev started on a busy port")
			}
			for _, want := range []string{held.Addr().String(), "address already in use", "is another capgate dev running?"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error lacks %q: %v", want, err)
				}
			}
		})
	}
}
