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

// TestDevRefusesItsOwnPortsTwice: --kafka-addr on --broker-addr's port
// failed "address already in use … is another capgate dev running?",
// against its own embedded Kafka (newuser5); flags of capgate dev that
// take one port twice — the Kafka listener's fetch lanes take the 3
// ports after --kafka-addr's — are a usage error naming both, before
// anything listens.
func TestDevRefusesItsOwnPortsTwice(t *testing.T) {
	dir := t.TempDir()
	for args, want := range map[string]string{
		"--broker-addr 127.0.0.1:39092 --kafka-addr 127.0.0.1:39092 --coordinator-addr 127.0.0.1:0 --gateway-addr 127.0.0.1:0": "--broker-addr 127.0.0.1:39092 and --kafka-addr 127.0.0.1:39092 take the same port",
		"--broker-addr 127.0.0.1:0 --kafka-addr 127.0.0.1:39093 --coordinator-addr 127.0.0.1:0 --gateway-addr 127.0.0.1:39095": "take the same port (--kafka-addr takes its port and the next 3",
		"--broker-addr 127.0.0.1:0 --kafka-addr 127.0.0.1:0 --coordinator-addr 127.0.0.1:39070 --gateway-addr 0.0.0.0:39070":   "--coordinator-addr 127.0.0.1:39070 and --gateway-addr 0.0.0.0:39070 take the same port",
	} {
		wantUsageError(t, append([]string{"dev", "--data-dir", dir, "--log-level", "error"}, strings.Fields(args)...), want)
	}
}

// TestDevListenFlagsSayWhatToWrite: --coordinator-addr 7071 (a port
// alone, as a new user writes it) started the embedded Kafka, then failed
// exit 1 `stack: listen address "7071": address 7071: missing port in
// address`, naming neither the flag nor what to write; a URL likewise.
// Now a usage error before anything listens.
func TestDevListenFlagsSayWhatToWrite(t *testing.T) {
	dir := t.TempDir()
	free := []string{"--broker-addr", "127.0.0.1:0", "--gateway-addr", "127.0.0.1:0", "--kafka-addr", "127.0.0.1:0"}
	for addr, want := range map[string]string{
		"7071":                  `--coordinator-addr "7071": want host:port (port 0 picks a free one): write 127.0.0.1:7071 (this machine only) or :7071 (every interface)`,
		"http://127.0.0.1:7071": `--coordinator-addr "http://127.0.0.1:7071": want host:port (port 0 picks a free one): an address, not a URL: write 127.0.0.1:7071`,
		"127.0.0.1:70x":         `--coordinator-addr "127.0.0.1:70x": want host:port`,
	} {
		wantUsageError(t, append([]string{"dev", "--data-dir", dir, "--log-level", "error", "--coordinator-addr", addr}, free...), want)
	}
	wantUsageError(t, []string{"dev", "--data-dir", dir, "--kafka-addr", "9093"}, `--kafka-addr "9093": want host:port`)
}

// TestDevTopicFlag: --topic's mistakes are usage errors before anything
// starts, saying what a topic name or a partition count may be.
func TestDevTopicFlag(t *testing.T) {
	dir := t.TempDir()
	for arg, want := range map[string]string{
		"orders:0":          "--topic orders:0: want NAME or NAME:PARTITIONS with 1 to 1000 partitions, e.g. orders:6",
		"orders:x":          "--topic orders:x: want NAME or NAME:PARTITIONS",
		"my orders":         "--topic my orders: a topic name is 1 to 249 letters, digits, '.', '_' or '-' (Kafka's rule)",
		"__consumer_x":      "names starting __ (Kafka's own) or capgate-state (capgate's state logs) are granted to no client",
		"capgate-state-x:1": "granted to no client",
		"demo:3":            "--topic demo:3: demo is given twice (demo is always created)",
	} {
		wantUsageError(t, []string{"dev", "--data-dir", dir, "--topic", arg}, want)
	}
}
