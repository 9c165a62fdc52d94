package store

import (
	"context"
	"fmt"

	"go.uber.org/zap"
)

// Beat is a leader's beat in its shard's log (key "log/leader", alone in
// its transaction): who leads and where clients reach it. Followers take
// any commit as a sign of a live leader (a takeover barrier only once
// between two leader writes, Position.Barriers) and the last beat as the
// leader's address (coordinator/leader decides with both). A beat is never part of
// the state a Load returns nor of a snapshot.
type Beat struct {
	// ID is the writer's id (LogOptions.WriterID).
	ID string
	// URL is the leader's advertised URL (not_leader hints name it);
	// empty in a resignation (LogStore.Resign).
	URL string
	// AtMs is the leader's clock when it wrote the beat (unix ms), for
	// people reading the log; nobody decides with it.
	AtMs int64
}

func encodeBeat(b Beat) []byte {
	e := newEncoder(len(b.ID) + len(b.URL) + 16)
	e.string(b.ID)
	e.string(b.URL)
	e.int(b.AtMs)
	return e.b
}

func decodeBeat(value []byte) (Beat, error) {
	d := newDecoder(value)
	b := Beat{ID: d.string(), URL: d.string(), AtMs: d.int()}
	if err := d.finish(); err != nil {
		return Beat{}, err
	}
	return b, nil
}

// Beat appends one beat naming this writer and url, as one transaction;
// it returns once the log committed it, or the error that fails this
// writer for good (ErrFenced once a newer writer took over). It shares
// Update's serialisation and failure: after a fenced beat every Update
// fails fenced too.
func (l *LogStore) Beat(url string) error {
	return l.writing("beat", func() error {
		beat := Beat{ID: l.opts.WriterID, URL: url, AtMs: l.opts.Now().UnixMilli()}
		return l.commit([]logRecord{{key: []byte(keyLogLeader), value: encodeBeat(beat)}})
	})
}

func (b Beat) resigned() bool { return b.URL == "" }

// errResigned fails every write after a resignation.
var errResigned = fmt.Errorf("%w: the writer resigned", ErrClosed)

// Resign ends this writer's leadership in the log, for a clean shutdown:
// one beat with no URL (readers of an older layout read it as a beat
// naming no address), after which every write fails ErrClosed — so the
// resignation is the writer's last commit, and a follower that applied it
// (Position.Resigned) may stand at once instead of after a lease. Safety
// is still the fence: a standby promotes as always (fence, barrier, read
// to the end), and anything this writer had in flight is fenced. The
// commit is bounded by ctx as well as by LogOptions.Timeout; on its
// failure the writer fails as after any failed write.
func (l *LogStore) Resign(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer context.AfterFunc(l.ctx, cancel)() // Interrupt ends it too
	defer cancel()
	return l.writing("resign", func() error {
		beat := Beat{ID: l.opts.WriterID, AtMs: l.opts.Now().UnixMilli()}
		if err := l.commitWithin(ctx, []logRecord{{key: []byte(keyLogLeader), value: encodeBeat(beat)}}); err != nil {
			return err
		}
		l.failed = errResigned
		if err := l.writer.close(); err != nil {
			l.opts.Logger.Warn("close resigned log writer", zap.String("log", l.t.name()), zap.Error(err))
		}
		l.writer = nil
		return nil
	})
}
