package kafkaclients

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/capgate/capgate/e2e/sdk"
	"github.com/capgate/capgate/gateway"
)

// TestMaxMembersIsFinal: a join beyond kafka_max_members (1 here) is
// answered GROUP_MAX_SIZE_REACHED, as Kafka answers a group at
// group.max.size, which clients report — kgo returns it from
// PollFetches — rather than COORDINATOR_NOT_AVAILABLE, which they retried
// silently for ever. For both group protocols.
func TestMaxMembersIsFinal(t *testing.T) {
	for _, proto := range []protocol{kip848, cooperativeSticky} {
		t.Run(proto.String(), func(t *testing.T) {
			s := Start(t, Options{Partitions: 2, Gateway: func(c *gateway.Config) { c.KafkaMaxMembers = 1 }})
			cred := s.ClientCredential(t, "full")
			first := joinGroup(t, s, "first", "full", cred, proto)
			sdk.Eventually(t, 20*time.Second, "the first member holding both partitions", func() (bool, string) {
				return len(first.Assigned()) == 2, fmt.Sprint(first.Assigned())
			})
			opts := []kgo.Opt{kgo.ClientID("second"), kgo.ConsumerGroup("full"), kgo.ConsumeTopics("orders")}
			if proto == kip848 {
				opts = append(opts, kgo.ServerSideBalancer())
			}
			cl := kgoClient(t, s.KafkaAddrs(), cred, false, opts...)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var errs []error
			for ctx.Err() == nil {
				fs := cl.PollFetches(ctx)
				fs.EachError(func(_ string, _ int32, err error) { errs = append(errs, err) })
				if len(errs) > 0 && errors.Is(errs[len(errs)-1], kerr.GroupMaxSizeReached) {
					return
				}
			}
			t.Fatalf("a member beyond kafka_max_members never got GROUP_MAX_SIZE_REACHED; its errors: %v", errs)
		})
	}
}
