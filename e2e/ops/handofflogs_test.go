package ops_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/capgate/capgate/e2e/harness"
	"github.com/capgate/capgate/internal/stack"
)

// TestNormalHandoffsLogAtWarn is issue #13's "normal handoffs log at WARN
// in the demo": the demo's scene — three consumers reading a topic that
// is produced to all along, then a fourth joining, so partitions move
// while fetches are in flight — must leave no warning or error in any
// part's log (coordinator, gateway, every SDK consumer): a handoff is the
// protocol working, logged at info or debug.
func TestNormalHandoffsLogAtWarn(t *testing.T) {
	t.Parallel()
	o := startOps(t, map[string]int32{"moves": 12})
	ctx := context.Background()
	cred, err := o.s.ClientCredential(ctx, "moves", []string{"g"}, []string{"moves"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	producer := o.s.StartProducer(stack.ProducerOptions{Topic: "moves", Partitions: 12})
	defer producer.Stop()
	core := o.logs // the consumers log into the same observer as the parts
	var consumers []*stack.Consumer
	start := func(name string) {
		c, err := stack.StartConsumer(ctx, stack.ConsumerOptions{
			Config: o.s.ClientConfig("g", []string{"moves"}, cred), CommitEvery: time.Second,
			Logger: zap.New(o.core).Named(name),
		})
		if err != nil {
			t.Fatal(err)
		}
		consumers = append(consumers, c)
	}
	for _, name := range []string{"c1", "c2", "c3"} {
		start(name)
	}
	settled := func(members int) {
		harness.Eventually(t, 30*time.Second, "every partition held by one of the members", func() (bool, string) {
			d, err := o.s.Describe(ctx, "g")
			if err != nil {
				return false, err.Error()
			}
			owners := map[string]int{}
			for _, p := range d.Partitions {
				if p.State != "owned" {
					return false, p.Topic + " not owned: " + p.State
				}
				owners[p.Owner]++
			}
			return len(owners) == members, "owners " + strings.Repeat("*", len(owners))
		})
	}
	settled(3)
	start("c4")
	settled(4)
	for _, c := range consumers {
		if err := c.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	}
	loud := core.FilterLevelExact(zapcore.WarnLevel).All()
	loud = append(loud, core.FilterLevelExact(zapcore.ErrorLevel).All()...)
	for _, e := range loud {
		t.Errorf("%s %s: %s %v", e.Level, e.LoggerName, e.Message, e.ContextMap())
	}
	if n := core.Len(); n == 0 {
		t.Fatal("no log lines at all: the test would pass whatever the levels")
	}
}
