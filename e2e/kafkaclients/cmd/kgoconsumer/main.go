// Command kgoconsumer is an unmodified franz-go (kgo) group consumer the
// Kafka listener's e2e tests run as a process of its own (so it can be
// frozen with SIGSTOP). It authenticates with CAPGATE_TOKEN over
// OAUTHBEARER and prints one JSON line per event on stdout: records
// polled, partitions assigned / revoked / lost, fetch errors and commit
// results. SIGTERM closes it (leaving the group).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
)

// Event is one output line.
type Event struct {
	At         int64   `json:"at"` // unix ns
	Ev         string  `json:"ev"` // record, assigned, revoked, lost, fetch_error, commit
	Partition  int32   `json:"p,omitempty"`
	Offset     int64   `json:"o,omitempty"`
	Partitions []int32 `json:"ps,omitempty"`
	Err        string  `json:"err,omitempty"`
}

var out = struct {
	sync.Mutex
	enc *json.Encoder
}{enc: json.NewEncoder(os.Stdout)}

func emit(e Event) {
	e.At = time.Now().UnixNano()
	out.Lock()
	defer out.Unlock()
	_ = out.enc.Encode(e)
}

func main() {
	brokers := flag.String("brokers", "", "comma-separated listener addresses")
	group := flag.String("group", "", "consumer group")
	topic := flag.String("topic", "", "topic")
	clientID := flag.String("client-id", "kgoconsumer", "client.id")
	protocol := flag.String("protocol", "kip848", "kip848 or cooperative")
	flag.Parse()
	token := os.Getenv("CAPGATE_TOKEN")
	part := func(ev string) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			emit(Event{Ev: ev, Partitions: m[*topic]})
		}
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(strings.Split(*brokers, ",")...),
		kgo.SASL(oauth.Oauth(func(context.Context) (oauth.Auth, error) { return oauth.Auth{Token: token}, nil })),
		kgo.ClientID(*clientID), kgo.ConsumerGroup(*group), kgo.ConsumeTopics(*topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500 * time.Millisecond),
		kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.AutoCommitInterval(100 * time.Millisecond),
		kgo.OnPartitionsAssigned(part("assigned")), kgo.OnPartitionsRevoked(part("revoked")), kgo.OnPartitionsLost(part("lost")),
		kgo.AutoCommitCallback(commitResults),
	}
	if *protocol == "kip848" {
		opts = append(opts, kgo.ServerSideBalancer())
	} else {
		opts = append(opts, kgo.HeartbeatInterval(100*time.Millisecond), kgo.SessionTimeout(2*time.Second))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(t string, p int32, err error) {
			if ctx.Err() == nil {
				emit(Event{Ev: "fetch_error", Partition: p, Err: err.Error()})
			}
		})
		fs.EachRecord(func(r *kgo.Record) { emit(Event{Ev: "record", Partition: r.Partition, Offset: r.Offset}) })
	}
	cl.Close()
}

// commitResults prints every partition of every autocommit.
func commitResults(_ *kgo.Client, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
	if err != nil {
		emit(Event{Ev: "commit", Partition: -1, Err: err.Error()})
		return
	}
	offsets := map[int32]int64{}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			offsets[p.Partition] = p.Offset
		}
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			e := Event{Ev: "commit", Partition: p.Partition, Offset: offsets[p.Partition]}
			if p.ErrorCode != 0 {
				e.Err = kerr.ErrorForCode(p.ErrorCode).Error()
			}
			emit(e)
		}
	}
}
