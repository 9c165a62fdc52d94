package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/e2e/sdk"
)

// TestCloseWithAnEndedContextStillCommits is the shutdown a Go program
// writes first (newuser3 #1): the poll loop runs under
// signal.NotifyContext's ctx, Ctrl-C ends ctx and with it the loop, and
// the program calls Close(ctx) with that same, already-cancelled ctx.
// Close closes anyway, within request_timeout: exactly what Poll returned
// is committed, and the member has left the group when Close returns
// (before, Close returned context.Canceled at once, nothing was
// committed, and the member stayed until its session timed out, so the
// next holder read every record again). A clean close also logs no
// "member unknown" at info (newuser3 #7): the answer of its own held
// heartbeat after the leave is expected.
func TestCloseWithAnEndedContextStillCommits(t *testing.T) {
	t.Parallel()
	const partitions, perPartition = 3, 5
	c := sdk.StartCluster(t, sdk.ClusterOptions{Partitions: partitions})
	ctx, stop := context.WithCancel(context.Background()) // signal.NotifyContext's
	defer stop()
	for p := range int32(partitions) {
		records := make([]*kgo.Record, perPartition)
		for i := range records {
			records[i] = &kgo.Record{Value: fmt.Appendf(nil, "v%d", i)}
		}
		if _, err := c.Broker.Produce(ctx, c.Topic, p, records); err != nil {
			t.Fatal(err)
		}
	}
	core, logs := observer.New(zapcore.DebugLevel)
	cfg := c.ClientConfig(sdk.MemberOptions{Group: "ended"}, c.ClientCredential(t, "ended"))
	cfg.CommitInterval = 0 // only Close commits
	consumer, err := client.NewConsumer(cfg, client.WithLogger(zap.New(zapcore.NewTee(core, sdk.Logger(t).Core()))))
	if err != nil {
		t.Fatal(err)
	}
	if err := consumer.Join(ctx); err != nil {
		t.Fatal(err)
	}
	for got := 0; got < partitions*perPartition; {
		records, err := consumer.Poll(ctx)
		if err != nil {
			t.Fatalf("poll after %d records: %v", got, err)
		}
		got += len(records)
	}
	stop() // Ctrl-C
	if _, err := consumer.Poll(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("poll with the ended ctx: %v, want context.Canceled", err)
	}
	if err := consumer.Close(ctx); err != nil {
		t.Errorf("close with the ended ctx: %v", err)
	}

	checkLeftAndCommitted(t, c, "ended", perPartition)
	if n := logs.FilterMessageSnippet("closing within request_timeout anyway").FilterLevelExact(zapcore.InfoLevel).Len(); n != 1 {
		t.Errorf("%d info lines saying Close closed anyway, want 1", n)
	}
	unknown := logs.FilterMessageSnippet("member unknown to the coordinator")
	if n := unknown.FilterLevelExact(zapcore.InfoLevel).Len(); n != 0 {
		t.Errorf("a clean close logged %d info lines %q: its own held heartbeat's answer after the leave is expected", n, unknown.All()[0].Message)
	}
}

// checkLeftAndCommitted checks that group has no member left (the last
// one left, not timed out) and every partition's committed offset is
// want (all the records delivered were committed).
func checkLeftAndCommitted(t *testing.T, c *sdk.Cluster, group string, want int64) {
	t.Helper()
	d := c.Describe(t, group)
	if len(d.Members) != 0 {
		t.Errorf("members after the close: %v, want none (left, not timed out)", d.Members)
	}
	for _, p := range d.Partitions {
		if p.Committed == nil || *p.Committed != want {
			t.Errorf("partition %d committed %v, want %d (every record delivered)", p.Partition, p.Committed, want)
		}
	}
}
