package sdk_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/capgate/capgate/e2e/sdk"
)

// TestCommitsOfThousandsOfPartitions is the regression test of
// BENCHMARKS.md's bug 2: a consumer holding 2,000 partitions commits
// them all, then closes, and every partition's committed offset is where
// it left it. (Each commit offset carries its capability, ~700 bytes: one
// commit naming 2,000 partitions is over the coordinator's 1 MiB body
// limit and was refused 413 — and a release commit of that size let
// Close return nil with nothing committed. The session now sends commits
// in chunks of session.MaxCommitPartitions.)
func TestCommitsOfThousandsOfPartitions(t *testing.T) {
	t.Parallel()
	const partitions = 2000
	c := sdk.StartCluster(t, sdk.ClusterOptions{Topic: "wide", Partitions: partitions})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for p := range int32(partitions) {
		if _, err := c.Broker.Produce(ctx, c.Topic, p, []*kgo.Record{{Value: []byte("v")}}); err != nil {
			t.Fatal(err)
		}
	}
	m := c.NewMember(t, sdk.MemberOptions{Name: "wide", Group: "wide"})
	if n := len(m.Assigned()); n != partitions {
		t.Fatalf("holds %d partitions, want %d", n, partitions)
	}
	sdk.Eventually(t, time.Minute, "every record delivered", func() (bool, string) {
		n := len(m.Deliveries())
		return n == partitions, fmt.Sprintf("%d delivered", n)
	})
	// One commit of every partition (each processed one record).
	if err := m.Consumer.Commit(ctx); err != nil {
		t.Fatalf("commit of %d partitions: %v", partitions, err)
	}
	checkCommitted(t, c, partitions, 1)
	m.Close(t) // fails the test on a close error
	checkCommitted(t, c, partitions, 1)
}

func checkCommitted(t *testing.T, c *sdk.Cluster, partitions int, want int64) {
	t.Helper()
	committed := 0
	for _, p := range c.Describe(t, "wide").Partitions {
		if p.Committed != nil && *p.Committed == want {
			committed++
		}
	}
	if committed != partitions {
		t.Errorf("%d of %d partitions have committed offset %d (CAPGATE_E2E_LOG=warn shows a 413)", committed, partitions, want)
	}
}
