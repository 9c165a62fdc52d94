package stack_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/internal/stack"
)

// metadataOf asks every broker for metadata as client id and reports the
// first error (a deadline when the cut swallowed the request).
func metadataOf(t *testing.T, cl *kgo.Client, wait time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for _, shard := range cl.RequestSharded(ctx, kmsg.NewPtrMetadataRequest()) {
		if shard.Err != nil {
			return shard.Err
		}
	}
	return nil
}

// TestKafkaCutOneProcess: with three brokers behind the cut, the client
// "zombie" is cut off (its connections open and silent, new ones too)
// while "other" keeps talking to every broker; after the heal "zombie"
// talks again.
func TestKafkaCutOneProcess(t *testing.T) {
	cut := stack.NewKafkaCut()
	c, err := kfake.NewCluster(kfake.NumBrokers(3), cut.Option())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	client := func(id string) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ClientID(id), kgo.RequestRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	zombie, other := client("zombie"), client("other")
	for name, cl := range map[string]*kgo.Client{"zombie": zombie, "other": other} {
		if err := metadataOf(t, cl, 10*time.Second); err != nil {
			t.Fatalf("%s before the cut: %v", name, err)
		}
	}

	cut.Cut("zombie")
	if err := metadataOf(t, zombie, 500*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("zombie in the cut: %v, want its requests swallowed (deadline)", err)
	}
	if n := cut.Swallowed("zombie"); n == 0 {
		t.Fatal("no connection of zombie lost bytes to the cut")
	}
	if err := metadataOf(t, other, 10*time.Second); err != nil {
		t.Fatalf("other during zombie's cut: %v", err)
	}

	cut.Heal("zombie")
	if n := cut.Swallowed("zombie"); n != 0 {
		t.Fatalf("%d damaged connections of zombie left open after the heal", n)
	}
	if err := metadataOf(t, zombie, 10*time.Second); err != nil {
		t.Fatalf("zombie after the heal: %v", err)
	}
}
