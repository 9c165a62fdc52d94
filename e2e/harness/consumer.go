package harness

import (
	"context"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/internal/stack"
)

// ConsumerConfig is what RunConsumer runs: an SDK consumer of one group
// that commits every CommitInterval.
type ConsumerConfig struct {
	Client client.Config
	// CommitInterval: the poll loop commits at most this often (0: never;
	// revoked partitions are still committed by their release).
	CommitInterval time.Duration
	// SyncCommit: the loop commits with Consumer.Commit (waits for the
	// coordinator) instead of CommitAsync.
	SyncCommit bool
	// CloseTimeout bounds the graceful close when ctx ends.
	CloseTimeout time.Duration
	// PrintSecrets puts capabilities and member tokens into the lines.
	PrintSecrets bool
	// Logger receives the SDK's logs (nil: none).
	Logger *zap.Logger
}

// RunConsumer joins the group with the SDK and runs the stack's poll
// loop (stack.StartConsumer) until ctx ends, then closes gracefully
// (revoke, release, leave). Every delivered record, coordinator call,
// grant, revoke, commit and fetch is reported to emit as a Line, stamped
// on the harness timeline. rec, if not nil, is the recorder to use (so
// the caller can kill or hold it).
func RunConsumer(ctx context.Context, cfg ConsumerConfig, rec *Recorder, emit func(Line)) error {
	if rec == nil {
		rec = NewRecorder(cfg.Client.Group, cfg.PrintSecrets, emit)
	}
	group := cfg.Client.Group
	var commit func(context.Context, *client.Consumer) error
	if cfg.SyncCommit {
		commit = func(ctx context.Context, c *client.Consumer) error { return c.Commit(ctx) }
	}
	c, err := stack.StartConsumer(ctx, stack.ConsumerOptions{
		Config: cfg.Client, Logger: cfg.Logger, HTTP: &http.Client{Transport: rec}, CommitEvery: cfg.CommitInterval, Commit: commit,
		OnRecords: func(member string, records []client.Record, _ time.Time) {
			at := Now()
			for _, r := range records {
				emit(Line{T: at, Kind: LineRecord, Member: member, Group: group, Topic: r.Topic, Partition: r.Partition,
					Epoch: r.Epoch, Offset: r.Offset, Value: string(r.Value)})
			}
		},
		OnHook: func(h stack.Hook, ps []client.Partition, _ time.Time) {
			for _, p := range ps {
				emit(Line{T: Now(), Kind: LineHook, Op: string(h), Group: group, Topic: p.Topic, Partition: p.Partition})
			}
		},
	})
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case <-c.Done():
	}
	c.StopPolling()
	closeCtx, cancel := context.WithTimeout(context.Background(), max(cfg.CloseTimeout, time.Second))
	defer cancel()
	if rec.Killed() {
		cancel() // a dead consumer does not say goodbye: just stop its goroutines
	}
	closeErr := c.Close(closeCtx)
	rec.CloseIdleConnections()
	switch {
	case rec.Killed():
		return ErrKilled
	case c.Err() != nil:
		emit(Line{T: Now(), Kind: LineError, Group: group, Error: c.Err().Error()})
		return c.Err()
	case closeErr != nil:
		emit(Line{T: Now(), Kind: LineError, Group: group, Error: closeErr.Error()})
		return closeErr
	}
	emit(Line{T: Now(), Kind: LineExit, Group: group})
	return nil
}
