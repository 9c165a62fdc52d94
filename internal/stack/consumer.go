package stack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/capgate/capgate/client"
)

// Hook names an SDK consumer hook.
type Hook string

// The hooks a Consumer reports.
const (
	HookGrant  Hook = "grant"
	HookRevoke Hook = "revoke"
	HookLost   Hook = "lost"
)

// ConsumerOptions configure StartConsumer.
type ConsumerOptions struct {
	Config client.Config
	// Logger receives the SDK's logs (nil: none).
	Logger *zap.Logger
	// HTTP is the SDK's client (a recording transport); nil: its own.
	HTTP *http.Client
	// CommitEvery: the poll loop commits at most this often (0: never; the
	// SDK still commits what was processed on revoke and on Close).
	CommitEvery time.Duration
	// Commit replaces the loop's commit (default: Consumer.CommitAsync,
	// which never holds the loop up; a synchronous Commit there stops
	// delivering while no coordinator answers).
	Commit func(ctx context.Context, c *client.Consumer) error
	// OnRecords receives every poll's records with the member id at the
	// time and the time Poll returned them, also those of a poll that
	// returned as the loop stopped (they were handed over: Close commits
	// them as processed).
	OnRecords func(member string, records []client.Record, at time.Time)
	// Process runs after OnRecords (a slow member's work).
	Process func(records []client.Record)
	// OnHook receives each hook call with its time.
	OnHook func(h Hook, partitions []client.Partition, at time.Time)
	// Options are more client options (a credential source).
	Options []client.Option
}

// Consumer is one SDK consumer (client.Consumer) of a stack with its poll
// loop: the one loop every suite, the demo and the benchmarks run. Safe
// for concurrent use.
type Consumer struct {
	*client.Consumer
	cancel context.CancelFunc
	done   chan struct{}

	mu  sync.Mutex
	err error
}

// StartConsumer builds the consumer, joins (bounded by ctx) and starts
// the poll loop, which runs until ctx ends, StopPolling, or a Poll error.
func StartConsumer(ctx context.Context, opts ConsumerOptions) (*Consumer, error) {
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	hook := func(h Hook) func([]client.Partition) {
		return func(ps []client.Partition) {
			if opts.OnHook != nil {
				opts.OnHook(h, ps, time.Now())
			}
		}
	}
	copts := []client.Option{client.WithLogger(log), client.OnGrant(hook(HookGrant)),
		client.OnRevoke(func(_ context.Context, ps []client.Partition) { hook(HookRevoke)(ps) }),
		client.OnLost(hook(HookLost))}
	if opts.HTTP != nil {
		copts = append(copts, client.WithHTTPClient(opts.HTTP))
	}
	cc, err := client.NewConsumer(opts.Config, append(copts, opts.Options...)...)
	if err != nil {
		return nil, fmt.Errorf("stack: consumer: %w", err)
	}
	if err := cc.Join(ctx); err != nil {
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = cc.Close(closeCtx)
		return nil, fmt.Errorf("stack: consumer: join: %w", err)
	}
	loopCtx, cancel := context.WithCancel(ctx)
	c := &Consumer{Consumer: cc, cancel: cancel, done: make(chan struct{})}
	go c.loop(loopCtx, opts)
	return c, nil
}

func (c *Consumer) loop(ctx context.Context, opts ConsumerOptions) {
	defer close(c.done)
	lastCommit := time.Now()
	for {
		records, err := c.Poll(ctx)
		if len(records) > 0 && opts.OnRecords != nil {
			opts.OnRecords(c.MemberID(), records, time.Now())
		}
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			c.mu.Lock()
			c.err = err
			c.mu.Unlock()
			return
		}
		if opts.Process != nil {
			opts.Process(records)
		}
		if opts.CommitEvery > 0 && time.Since(lastCommit) >= opts.CommitEvery {
			// A refused commit (stale epoch after a handoff) is no reason
			// to stop: the SDK reports it (logs a background commit's
			// failure) and the loop goes on.
			if opts.Commit != nil {
				_ = opts.Commit(ctx, c.Consumer)
			} else {
				c.CommitAsync()
			}
			lastCommit = time.Now()
		}
	}
}

// Done is closed once the poll loop stopped.
func (c *Consumer) Done() <-chan struct{} { return c.done }

// Err is the Poll error that stopped the loop (nil when it was stopped).
func (c *Consumer) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// StopPolling stops the poll loop and waits for it; the consumer stays a
// member (its heartbeats go on) until Close.
func (c *Consumer) StopPolling() {
	c.cancel()
	<-c.done
}

// Close stops the poll loop and closes the consumer gracefully (revoke,
// final commit, release, leave) within ctx. Closing twice is not an error.
func (c *Consumer) Close(ctx context.Context) error {
	c.StopPolling()
	if err := c.Consumer.Close(ctx); err != nil && !errors.Is(err, client.ErrClosed) {
		return err
	}
	return nil
}
