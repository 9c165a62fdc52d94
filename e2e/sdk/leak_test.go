package sdk_test

import (
	"bytes"
	"context"
	"fmt"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/e2e/sdk"
)

// sdkGoroutines lists the goroutines of the SDK (a frame in package
// client, its driver or session), one stack each. (HTTP connections'
// goroutines have no such frame, and the stack's own clients open and
// close theirs at any time: TestCloseLeavesNoSpareConnections checks the
// SDK's connections.)
func sdkGoroutines() []string {
	var buf bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&buf, 2)
	var out []string
	for _, g := range strings.Split(buf.String(), "\n\n") {
		if strings.Contains(g, "github.com/capgate/capgate/client.") ||
			strings.Contains(g, "github.com/capgate/capgate/client/") {
			out = append(out, g)
		}
	}
	return out
}

// TestCloseLeavesNoGoroutine: once Close returned, every goroutine the
// consumer started has ended — request attempts, fetches ahead, the
// timer and hook loops, the inbox's stepper. A consumer of 20
// partitions with records flowing (fetches ahead in flight) closes; the
// goroutines must be back to those before it was built. Not parallel:
// another test's consumer would count.
func TestCloseLeavesNoGoroutine(t *testing.T) {
	const partitions = 20
	c := sdk.StartCluster(t, sdk.ClusterOptions{Topic: "leak", Partitions: partitions})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for p := range int32(partitions) {
		records := make([]*kgo.Record, 50)
		for i := range records {
			records[i] = &kgo.Record{Value: []byte("v")}
		}
		if _, err := c.Broker.Produce(ctx, c.Topic, p, records); err != nil {
			t.Fatal(err)
		}
	}
	before := len(sdkGoroutines())
	cfg := c.Stack.ClientConfig("leak", []string{c.Topic}, c.ClientCredential(t, "leak"))
	cfg.PollMaxRecords = 10 // many polls: fetches ahead run
	consumer, err := client.NewConsumer(cfg, client.WithLogger(sdk.Logger(t)))
	if err != nil {
		t.Fatal(err)
	}
	if err := consumer.Join(ctx); err != nil {
		t.Fatal(err)
	}
	for got := 0; got < partitions*25; {
		rs, err := consumer.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got += len(rs)
	}
	if during := len(sdkGoroutines()); during <= before {
		t.Fatalf("%d SDK goroutines while consuming, %d before: the check counts nothing", during, before)
	}
	closeCtx, cancelClose := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelClose()
	if err := consumer.Close(closeCtx); err != nil {
		t.Fatal(err)
	}
	// Close waited for them; poll all the same (a goroutine's last
	// frames may still be unwinding).
	var left []string
	sdk.Eventually(t, 30*time.Second, "the SDK's goroutines ended", func() (bool, string) {
		left = sdkGoroutines()
		return len(left) <= before, fmt.Sprintf("%d goroutines, %d before; the first:\n%s", len(left), before, first(left))
	})
}

func first(gs []string) string {
	if len(gs) == 0 {
		return ""
	}
	return gs[0]
}
