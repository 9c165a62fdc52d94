package guard

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/gateway/authz"
	"github.com/capgate/capgate/internal/coordinators"
)

// SyncConfig are the sync client's settings.
type SyncConfig struct {
	// Timeout is sync_timeout: with no successful poll for this long,
	// counted from when it was sent, the gateway refuses everything.
	Timeout time.Duration
	// BackoffMin and BackoffMax bound the jittered pause after a failed
	// poll; it doubles with every failure in a row.
	BackoffMin, BackoffMax time.Duration
	// Bugs plants known bugs (tests only; zero: none).
	Bugs Bugs
}

// Bugs plants known bugs in the gateway's decisions, for the tests that
// prove the simulation's checkers catch them. The zero value, every
// production gateway's, plants none.
type Bugs struct {
	// AckBeforeApply acknowledges an update one round before applying it:
	// Apply applies the previous answer and keeps this one for later.
	AckBeforeApply bool
	// NoSelfFence keeps admitting after sync_timeout without a good poll.
	NoSelfFence bool
	// KeepVictims cancels nothing when an update refuses fetches in
	// flight, so the ack goes out while they may still serve.
	KeepVictims bool
}

// ErrSeqWentBack: a delta answer below what the gateway acknowledged; the
// coordinator forgot it, so the next poll asks for a snapshot.
var ErrSeqWentBack = errors.New("sync: sequence went back without a reset: asking for a snapshot")

// Follower is the sync client's state.
type Follower struct {
	cfg     SyncConfig
	view    *authz.View
	after   uint64 // what the next poll acknowledges (0: asks for a snapshot)
	backoff time.Duration
	// lastGood is when the last successful poll was sent (unix ns; 0:
	// never), read by Refusal from any goroutine.
	lastGood atomic.Int64
	// settings are the coordinator's as of the last reset (nil before);
	// unfit says why they do not fit this gateway's sync_timeout.
	settings atomic.Pointer[Settings]
	unfit    atomic.Pointer[error]
	deferred *api.SyncResponse // Bugs.AckBeforeApply
}

// NewFollower returns the state of a gateway that never synced: it
// refuses everything (not_ready) until its first answer was applied.
func NewFollower(cfg SyncConfig, view *authz.View) *Follower {
	return &Follower{cfg: cfg, view: view, backoff: cfg.BackoffMin}
}

// After is the after of the next poll: the seq it acknowledges.
func (f *Follower) After() uint64 { return f.after }

// Apply checks an answer and applies it to the view at now; the caller
// then cancels (and waits for) the fetches the changes refuse, and only
// then calls Acked. A reset also carries the coordinator's settings,
// learned here (Settings; a new value means the shell verifies tokens
// with them from now on). On an error nothing was applied; the poll
// failed.
func (f *Follower) Apply(u api.SyncResponse, now time.Time) (authz.Changes, error) {
	if !u.Reset && u.Seq < f.after {
		acked := f.after
		f.after = 0
		return authz.Changes{}, fmt.Errorf("%w (acknowledged %d, answer %d)", ErrSeqWentBack, acked, u.Seq)
	}
	if u.Reset {
		if err := f.learn(u.Settings); err != nil {
			return authz.Changes{}, err
		}
	}
	if f.cfg.Bugs.AckBeforeApply {
		u, f.deferred = f.swapDeferred(u)
		if u.Seq == 0 && !u.Reset {
			return authz.Changes{}, nil
		}
	}
	return f.view.Apply(u, now)
}

// swapDeferred keeps u for the next round and returns the one kept from
// the last (planted bug).
func (f *Follower) swapDeferred(u api.SyncResponse) (api.SyncResponse, *api.SyncResponse) {
	prev := f.deferred
	if prev == nil {
		return api.SyncResponse{}, &u
	}
	return *prev, &u
}

// Acked records that the answer with seq, to a poll sent at sent, was
// applied and every fetch it refused has finished: the next poll
// acknowledges seq, and the gateway is in sync as of sent. It reports
// whether this is the first sync.
func (f *Follower) Acked(sent time.Time, seq uint64) (first bool) {
	f.after = seq
	if f.cfg.Bugs.AckBeforeApply && f.deferred != nil {
		f.after = f.deferred.Seq
	}
	f.backoff = f.cfg.BackoffMin
	return f.lastGood.Swap(sent.UnixNano()) == 0
}

// Failed records a failed poll (transport error, refusal, undecodable or
// refused answer) and returns how long to wait before the next one:
// jittered in [d/2, d] with rnd (uniform in [0, n)), d doubling up to
// BackoffMax. The next poll keeps the same after.
func (f *Follower) Failed(rnd func(n int64) int64) time.Duration {
	d := f.backoff
	f.backoff = min(2*f.backoff, f.cfg.BackoffMax)
	return d/2 + time.Duration(rnd(int64(d/2)+1))
}

// Missed records a failed poll to base, one of the coordinator URLs in
// list, and returns where the next poll goes and how long to wait first.
// leader is nil unless base answered not_leader, naming *leader (may be
// ""). A listed leader, or another URL of the list not yet tried in this
// round, is polled at once; once a whole round missed, the wait is
// Failed's backoff.
func (f *Follower) Missed(list *coordinators.List, base string, leader *string, rnd func(n int64) int64) (next string, wait time.Duration) {
	var backoff bool
	if leader != nil {
		next, backoff = list.NotLeader(base, *leader)
	} else {
		next, backoff = list.Failed(base)
	}
	if !backoff {
		return next, 0
	}
	return next, f.Failed(rnd)
}

// learn takes the settings of a reset.
func (f *Follower) learn(w *api.CoordinatorSettings) error {
	s, err := settingsOf(w)
	if err != nil {
		return err
	}
	if old := f.settings.Load(); old == nil || !old.equal(s) {
		f.settings.Store(&s)
	}
	if unfit := s.fit(f.cfg.Timeout); unfit != nil {
		f.unfit.Store(&unfit)
	} else {
		f.unfit.Store(nil)
	}
	return nil
}

// Settings are the coordinator's settings as of the last reset (nil
// before the first); the pointer changes only when they do. Safe for
// concurrent use.
func (f *Follower) Settings() *Settings { return f.settings.Load() }

// Unfit says why the gateway is not ready although it synced: the
// coordinator's settings do not fit its sync_timeout (nil when they do).
// Safe for concurrent use.
func (f *Follower) Unfit() error {
	if e := f.unfit.Load(); e != nil {
		return *e
	}
	return nil
}

// Refusal is the 503 code while the gateway cannot vouch for its view at
// now: not_ready before the first sync and while the coordinator's
// settings do not fit its sync_timeout (Unfit), out_of_sync once Timeout
// passed since the last successful poll was sent — unless the
// coordinator's settings say silent gateways serve (Settings.Serve): then
// the view stays in use, and expiry ends what it admits; "" when in
// sync. Safe for concurrent use.
func (f *Follower) Refusal(now time.Time) api.Code {
	last := f.lastGood.Load()
	switch {
	case last == 0 || f.unfit.Load() != nil:
		return api.CodeNotReady
	case now.UnixNano()-last > int64(f.cfg.Timeout) && !f.cfg.Bugs.NoSelfFence && !f.serving():
		return api.CodeOutOfSync
	}
	return ""
}

// serving: the coordinator's settings say a gateway that cannot sync
// keeps serving unexpired capabilities (Settings.Serve).
func (f *Follower) serving() bool {
	s := f.settings.Load()
	return s != nil && s.Serve
}

// LastGood is when the last successful poll was sent (zero: never). Safe
// for concurrent use.
func (f *Follower) LastGood() time.Time {
	if last := f.lastGood.Load(); last != 0 {
		return time.Unix(0, last)
	}
	return time.Time{}
}
