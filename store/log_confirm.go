package store

// WriteMark is a point in a LogStore writer's history, taken with Mark
// before serving a request and confirmed with Confirm before answering it.
//
// Why: a leader deposed while it had nothing to write learns it only at
// its next write. Until then it could answer from memory what needs no
// persist — a gateway's sync poll above all, whose reset may carry fences
// older than ones the new leader already published. Confirm makes such an
// answer rest on Kafka's fencing, not on a lease running out: it returns
// nil only once a transaction this writer BEGAN after the mark has
// committed, and the broker commits none of ours after a newer writer's
// InitProducerID. So the request reached us before any takeover of the
// shard, which is what the gateway's own timeouts (sync_timeout <
// gateway_timeout − max_clock_skew, counted from when it sent the poll)
// already account for.
type WriteMark struct {
	l     *LogStore
	begun uint64
}

// Mark returns the current point of this writer's history.
func (l *LogStore) Mark() WriteMark {
	return WriteMark{l: l, begun: l.begun.Load()}
}

// Confirm returns nil once a transaction begun after the mark committed:
// at once when one already has (any Update or Beat since — the usual case
// for an answer a persisted Ready released), else after appending an
// empty transaction (a commit record alone), which concurrent Confirms
// share. It returns the error that fails this writer for good (ErrFenced
// once a newer writer took over, which also makes every later write
// fail) or ErrClosed.
func (m WriteMark) Confirm() error {
	l := m.l
	return l.writing("confirm", func() error {
		if l.confirmed > m.begun {
			return nil
		}
		return l.commit(nil)
	})
}

// began numbers one commit as it begins (callers hold writeMu).
func (l *LogStore) began() uint64 { return l.begun.Add(1) }
