package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/tlsconf"
)

// These examples are compiled by go test, and those with an Output
// comment run; the others need a running capgate. README.md's "Use the
// Go SDK" program is built and run against a real stack by e2e/sdk
// TestReadmeGoSDK.

// A consumer that processes records until Ctrl-C, then commits what it
// processed and leaves the group.
func ExampleNewConsumer() {
	cfg := client.DefaultConfig()
	cfg.CoordinatorURL = "http://127.0.0.1:7070" // or the replicas', comma-separated
	cfg.Gateways = []string{"http://127.0.0.1:8080"}
	cfg.Group, cfg.Topics = "billing", []string{"orders"}
	cfg.Credential = os.Getenv("CAPGATE_CREDENTIAL")
	c, err := client.NewConsumer(cfg, client.OnRevoke(func(ctx context.Context, revoked []client.Partition) {
		// Finish the work on these partitions: their processed offsets
		// are committed when this returns, and the next holder starts there.
	}))
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := c.Join(ctx); err != nil {
		log.Fatal(err)
	}
	for {
		records, err := c.Poll(ctx) // the previous Poll's records count as processed now
		if err != nil {
			break // ctx ended, or the consumer stopped: Close says why
		}
		for _, r := range records {
			fmt.Printf("%s/%d@%d %s\n", r.Topic, r.Partition, r.Offset, r.Value)
		}
	}
	// ctx has ended: Close gets a context of its own for the final commit
	// and the leave.
	closeCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Close(closeCtx); err != nil {
		log.Print(err)
	}
}

// A producer writes to one partition with a capability holding the
// produce op (capgate admin grant --topic orders --partition 0 --ops
// produce). It is safe for concurrent use.
func ExampleNewProducer() {
	p, err := client.NewProducer([]string{"http://127.0.0.1:8080"}, os.Getenv("CAPGATE_CAPABILITY"))
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offset, err := p.Produce(ctx, "orders", 0, []client.Record{{Key: []byte("k"), Value: []byte("hello")}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("written at offset", offset)
}

// With TLS the URLs say https:// and Config.TLS names the CA bundle the
// servers' certificates chain to (capgate dev --tls writes it to
// $CAPGATE_CACERT), and a client certificate for mTLS if the servers ask
// for one. A producer takes the same files through WithTLS.
func ExampleConfig_tls() {
	cfg := client.DefaultConfig()
	cfg.CoordinatorURL = "https://127.0.0.1:7070"
	cfg.Gateways = []string{"https://127.0.0.1:8080"}
	cfg.Group, cfg.Topics = "billing", []string{"orders"}
	cfg.Credential = os.Getenv("CAPGATE_CREDENTIAL")
	cfg.TLS = tlsconf.ClientConfig{CAFile: os.Getenv("CAPGATE_CACERT")} // CertFile, KeyFile: mTLS
	if _, err := client.NewConsumer(cfg); err != nil {
		log.Fatal(err)
	}
	if _, err := client.NewProducer(cfg.Gateways, os.Getenv("CAPGATE_CAPABILITY"), client.WithTLS(cfg.TLS)); err != nil {
		log.Fatal(err)
	}
}

// A consumer whose credential is a short-lived token (an IdP's, an OAuth
// client's) asks for the current one at every join; before its member
// token expires it renews the member with it — partitions released with
// their offsets and granted again, nothing lost or repeated.
func ExampleWithCredentialSource() {
	cfg := client.DefaultConfig()
	cfg.CoordinatorURL = "http://127.0.0.1:7070"
	cfg.Gateways = []string{"http://127.0.0.1:8080"}
	cfg.Group, cfg.Topics = "billing", []string{"orders"}
	// cfg.Credential stays empty: the source supplies it.
	currentToken := func(ctx context.Context) (string, error) {
		// Fetch or refresh the token here (an OAuth client-credentials
		// grant, a file your sidecar rewrites, …).
		b, err := os.ReadFile("/var/run/secrets/capgate/token")
		return string(b), err
	}
	c, err := client.NewConsumer(cfg, client.WithCredentialSource(currentToken))
	if err != nil {
		log.Fatal(err)
	}
	_ = c // Join, Poll and Close as in ExampleNewConsumer
}

// A consumer logging through the program's log/slog logger, as JSON on
// stderr at INFO and above (joins, grants, revokes, and the warnings of a
// gateway or coordinator that does not answer).
func ExampleWithSlog() {
	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg := client.DefaultConfig()
	cfg.CoordinatorURL = "http://127.0.0.1:7070"
	cfg.Gateways = []string{"http://127.0.0.1:8080"}
	cfg.Group, cfg.Topics = "billing", []string{"orders"}
	cfg.Credential = os.Getenv("CAPGATE_CREDENTIAL")
	c, err := client.NewConsumer(cfg, client.WithSlog(logger.With("service", "billing")))
	if err != nil {
		logger.Error("consumer", "error", err)
		os.Exit(1)
	}
	_ = c // Join, Poll, Close as in ExampleNewConsumer
}

// The consumers of a process share a FetchPool: by default at most
// 1,024 fetches in flight to one gateway from all of them together, on
// one set of connections (a gateway serves 2,000 connections from one
// address by default). A service whose gateways allow it more gives its
// consumers a pool of its own size; each consumer still holds at most
// its Config.GatewayFetchesMax of it.
func ExampleWithFetchPool() {
	pool := client.NewFetchPool(1800) // the gateways' max_connections_per_address raised to match
	var consumers []*client.Consumer
	for _, group := range []string{"billing", "audit", "search"} {
		cfg := client.DefaultConfig()
		cfg.CoordinatorURL = "http://127.0.0.1:7070"
		cfg.Gateways = []string{"http://127.0.0.1:8080"}
		cfg.Group, cfg.Topics = group, []string{"orders"}
		cfg.Credential = os.Getenv("CAPGATE_CREDENTIAL")
		c, err := client.NewConsumer(cfg, client.WithFetchPool(pool))
		if err != nil {
			log.Fatal(err)
		}
		consumers = append(consumers, c) // Join, Poll as in ExampleNewConsumer
	}
	for _, c := range consumers {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = c.Close(ctx) // the last Close closes the pool's connections
		cancel()
	}
}

// A configuration is checked before anything is sent: NewConsumer (and
// Validate) name the first bad field, by its Go name and its YAML key,
// as a *ConfigError.
func ExampleConfig_Validate() {
	cfg := client.DefaultConfig()
	cfg.CoordinatorURL = "http://127.0.0.1:7070"
	cfg.Gateways = []string{"http://127.0.0.1:8080"}
	cfg.Group, cfg.Topics = "billing", []string{"orders"}
	cfg.Credential = "a-client-credential"
	fmt.Println(cfg.Validate())
	cfg.GatewayFetchesMax = 0
	_, err := client.NewConsumer(cfg)
	var bad *client.ConfigError
	if errors.As(err, &bad) {
		fmt.Println(bad.Key)
	}
	fmt.Println(err)
	// Output:
	// <nil>
	// gateway_fetches_max
	// Config.GatewayFetchesMax (client.gateway_fetches_max): must be > 0, got 0
}

// MarkAfter names the offset to commit after a record: the next one.
func ExampleMarkAfter() {
	r := client.Record{Topic: "orders", Partition: 3, Offset: 41, Epoch: 7}
	o := client.MarkAfter(&r)
	fmt.Println(o.Partition, o.Offset, o.Epoch)
	// Output:
	// orders/3 42 7
}
