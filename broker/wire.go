package broker

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// What the gateway's Kafka listener (gateway/kafkaproto) needs beyond
// Fetch and Produce: it forwards Kafka requests it has already
// authorized, record batches untouched, so it works on kmsg requests.

// Route is where one partition lives, as of the metadata cache.
type Route struct {
	TopicID     [16]byte
	Leader      int32 // node id
	LeaderEpoch int32
	Addr        string // leader host:port
}

// Route returns the leader of topic/partition from the metadata cache
// (loading it when stale, or always with refresh). Errors are kerr errors
// (UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, …) or transport and
// context errors, unwrapped.
func (c *Client) Route(ctx context.Context, topic string, partition int32, refresh bool) (Route, error) {
	r, err := c.meta.route(ctx, topic, partition, refresh)
	if err != nil {
		return Route{}, err
	}
	return Route{TopicID: r.topicID, Leader: r.leader, LeaderEpoch: r.epoch, Addr: r.addr}, nil
}

// FetchRaw sends req, a Fetch naming only partitions the broker at addr
// leads, on a leased fetch connection of that broker (as Fetch does, so
// concurrent long polls never queue behind each other; one with
// MaxWaitMillis takes a long-poll connection, waiting for one at most
// that long) and returns the broker's answer untouched. Cancelling ctx
// returns at once and drops the connection's socket.
func (c *Client) FetchRaw(ctx context.Context, addr string, req *kmsg.FetchRequest) (*kmsg.FetchResponse, error) {
	resp, _, err := c.FetchRawRecycled(ctx, addr, req)
	return resp, err
}

// FetchRawRecycled is FetchRaw whose answer's buffer (the record batches
// alias it) is recycled: call release once nothing uses the answer any
// more (never calling it is fine: the buffer is then collected). The
// gateway's Kafka listener streams megabytes per Fetch; without this each
// answer allocated and zeroed a fresh buffer (BENCHMARKS.md §8).
func (c *Client) FetchRawRecycled(ctx context.Context, addr string, req *kmsg.FetchRequest) (resp *kmsg.FetchResponse, release func(), err error) {
	bp, err := c.fetchPools.get(addr)
	if err != nil {
		return nil, nil, err
	}
	wait := time.Duration(req.MaxWaitMillis) * time.Millisecond
	pool, giveUp := bp.short, (<-chan time.Time)(nil)
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		pool, giveUp = bp.long, t.C
	}
	conn, _, err := pool.acquire(ctx, giveUp)
	if errors.Is(err, errNoSlot) {
		now := *req
		now.MaxWaitMillis = 0
		return c.FetchRawRecycled(ctx, addr, &now)
	}
	if err != nil {
		return nil, nil, err
	}
	resp, frame, err := conn.fetch(ctx, req, time.Now().Add(wait+c.cfg.RequestTimeout), c.cfg.RequestTimeout/2)
	pool.release(conn, err == nil)
	if err != nil {
		return nil, nil, err
	}
	return resp, func() { putFrame(frame) }, nil
}

// Request sends req with the client's kgo client: Metadata, ListOffsets
// and OffsetForLeaderEpoch are routed (and split) by kgo; requests for any
// broker (InitProducerID without a transactional id) go to one of them.
func (c *Client) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	return c.kgo.Request(ctx, req)
}

// RequestNode sends req to broker node as is (Produce to a leader).
func (c *Client) RequestNode(ctx context.Context, node int32, req kmsg.Request) (kmsg.Response, error) {
	return c.kgo.Broker(int(node)).Request(ctx, req)
}
