package harness

import (
	"context"
	"errors"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/capgate/capgate/client"
)

// ConsumerConfig is what RunConsumer runs: an SDK consumer of one group
// that commits every CommitInterval.
type ConsumerConfig struct {
	Client client.Config
	// CommitInterval: the poll loop commits at most this often (0: never;
	// revoked partitions are still committed by their release).
	CommitInterval time.Duration
	// CloseTimeout bounds the graceful close when ctx ends.
	CloseTimeout time.Duration
	// PrintSecrets puts capabilities and member tokens into the lines.
	PrintSecrets bool
	// Logger receives the SDK's logs (nil: none).
	Logger *zap.Logger
}

// RunConsumer joins the group with the SDK (client.NewConsumer) and polls
// until ctx ends, then closes gracefully (revoke, release, leave). Every
// delivered record, coordinator call, grant, revoke, commit and fetch is
// reported to emit as a Line, stamped on the harness timeline. rec, if not
// nil, is the recorder to use (so the caller can kill or hold it).
func RunConsumer(ctx context.Context, cfg ConsumerConfig, rec *Recorder, emit func(Line)) error {
	if rec == nil {
		rec = NewRecorder(cfg.Client.Group, cfg.PrintSecrets, emit)
	}
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	group := cfg.Client.Group
	consumer, err := newConsumer(cfg, rec, log, emit)
	if err != nil {
		return err
	}
	if err := consumer.Join(ctx); err != nil {
		return err
	}
	err = pollLoop(ctx, consumer, cfg.CommitInterval, group, emit)
	closeCtx, cancel := context.WithTimeout(context.Background(), max(cfg.CloseTimeout, time.Second))
	defer cancel()
	if rec.Killed() {
		cancel() // a dead consumer does not say goodbye: just stop its goroutines
	}
	closeErr := consumer.Close(closeCtx)
	rec.CloseIdleConnections()
	if rec.Killed() {
		return ErrKilled
	}
	if err != nil {
		emit(Line{T: Now(), Kind: LineError, Group: group, Error: err.Error()})
		return err
	}
	if closeErr != nil && !errors.Is(closeErr, client.ErrClosed) {
		emit(Line{T: Now(), Kind: LineError, Group: group, Error: closeErr.Error()})
		return closeErr
	}
	emit(Line{T: Now(), Kind: LineExit, Group: group})
	return nil
}

// newConsumer builds the SDK consumer with rec as its transport and hooks
// that report as lines.
func newConsumer(cfg ConsumerConfig, rec *Recorder, log *zap.Logger, emit func(Line)) (*client.Consumer, error) {
	group := cfg.Client.Group
	hook := func(op string) func([]client.Partition) {
		return func(ps []client.Partition) {
			for _, p := range ps {
				emit(Line{T: Now(), Kind: LineHook, Op: op, Group: group, Topic: p.Topic, Partition: p.Partition})
			}
		}
	}
	return client.NewConsumer(cfg.Client,
		client.WithLogger(log), client.WithHTTPClient(&http.Client{Transport: rec}),
		client.OnGrant(hook("grant")),
		client.OnRevoke(func(_ context.Context, ps []client.Partition) { hook("revoke")(ps) }),
		client.OnLost(hook("lost")),
	)
}

// pollLoop delivers until ctx ends (nil) or Poll fails.
func pollLoop(ctx context.Context, consumer *client.Consumer, commitEvery time.Duration, group string, emit func(Line)) error {
	lastCommit := Now()
	for {
		records, err := consumer.Poll(ctx)
		// Records Poll returned are delivered, even if ctx ended meanwhile:
		// the Close that follows counts them as processed and commits them.
		at, member := Now(), consumer.MemberID()
		for _, r := range records {
			emit(Line{T: at, Kind: LineRecord, Member: member, Group: group, Topic: r.Topic, Partition: r.Partition,
				Epoch: r.Epoch, Offset: r.Offset, Value: string(r.Value)})
		}
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		if commitEvery > 0 && Since(lastCommit) >= commitEvery {
			// A refused commit (stale epoch after a handoff) is reported by
			// the recorder; the loop goes on.
			_ = consumer.Commit(ctx)
			lastCommit = Now()
		}
	}
}
