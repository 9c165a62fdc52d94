package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/gateway/guard"
	"github.com/capgate/capgate/internal/coordinators"
	"github.com/capgate/capgate/ocap"
)

// Sync client bounds.
const (
	syncBackoffMin = 50 * time.Millisecond
	syncBackoffMax = time.Second
	// A coordinator down or refusing the gateway's token is polled about
	// once a second (syncBackoffMax), and each failed poll was a warning:
	// 3,600 lines an hour of one outage (newuser10). Its first
	// syncFailBurst are logged, then one per 30 s with how many were
	// suppressed meanwhile; /readyz and capgate_gateway_sync_polls_total
	// tell every one.
	syncFailBurst          = 3
	syncFailLinesPerSecond = 1.0 / 30
	syncBodyMax            = 64 << 20 // a snapshot of every fence and denied id
	cacheSweepEach         = 30 * time.Second
)

// syncLoop long-polls the coordinator until ctx ends, around the
// follower's decisions (gateway/guard): each answer is applied to the
// view (guard.Follower.Apply), the verifier gets the new keys, the
// fetches the update refuses are cancelled and waited for (inflight.revoke,
// guard.Registry.Refused), and only then does the next poll, with
// after=seq, acknowledge it (Follower.Acked). Errors back off
// (Follower.Failed: jittered, bounded) and poll again with the same
// after; meanwhile the gateway self-fences once sync_timeout has passed
// (Follower.Refusal).
func (g *Gateway) syncLoop(ctx context.Context) {
	defer close(g.syncDone)
	lastSweep := time.Now()
	lastGood := time.Now()
	silent := 0 // polls given up unanswered in a row (pollDeadline)
	for ctx.Err() == nil {
		sent := time.Now()
		base := g.coordinators.Current()
		// With one coordinator there is nobody else to ask: wait for it
		// (a slow one under load) up to sync_timeout, as always.
		deadline := sent.Add(g.cfg.SyncTimeout)
		if len(g.coordinators.URLs()) > 1 {
			deadline = pollDeadline(sent, lastGood, g.cfg.SyncWait, g.cfg.SyncTimeout, silent)
		}
		update, err := g.poll(ctx, base, g.follower.After(), deadline)
		if errors.Is(err, errPollSilent) {
			silent++
		}
		if err == nil {
			err = g.applySync(ctx, update, sent)
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			g.metrics.syncPolls.WithLabelValues("error").Inc()
			var nl *notLeaderError
			var leader *string
			if errors.As(err, &nl) {
				leader = &nl.leader
			}
			var conflict *conflictError
			if errors.As(err, &conflict) {
				g.noteRefused(conflict)
			}
			next, wait := g.follower.Missed(g.coordinators, base, leader, rand.Int64N)
			switch {
			case conflict != nil:
				// Logged at ERROR once (noteRefused); /readyz names it.
			case followsHint(leader, next, wait):
				// A replica that does not lead named the one that does,
				// which the gateway asks at once: how it finds the
				// leader (at every start, after every takeover), not a
				// failure.
				g.log.Info("sync: following the leading coordinator", zap.String("asked", base), zap.String("leader", next))
			default:
				msg := err.Error()
				g.sync.failed.Store(&msg)
				g.syncFailures.LineAt(time.Now(), "sync failed", zap.Uint64("after", g.follower.After()), zap.String("coordinator", base),
					zap.String("next", next), zap.Duration("retry_in", wait), zap.Error(err))
			}
			sleep(ctx, wait)
			continue
		}
		g.coordinators.Succeeded(base)
		g.noteRefused(nil)
		g.sync.failed.Store(nil)
		lastGood, silent = sent, 0
		g.metrics.syncPolls.WithLabelValues("ok").Inc()
		if now := time.Now(); now.Sub(lastSweep) > cacheSweepEach {
			g.cache.Sweep(now)
			lastSweep = now
		}
	}
}

// applySync applies one answer to a poll sent at sent, cancels and waits
// for the fetches it refuses, then records it as acknowledged.
func (g *Gateway) applySync(ctx context.Context, u api.SyncResponse, sent time.Time) error {
	now := time.Now()
	changes, err := g.follower.Apply(u, now)
	if err != nil {
		return err
	}
	if s := g.follower.Settings(); s != g.settings {
		if err := g.learn(s); err != nil {
			return err
		}
	} else if changes.KeysChanged {
		removed := g.verifier.Load().SetKeys(g.view.Keys())
		g.cache.FlushKeys(removed...)
		// The credentials' cache too: a credential of a retired (say,
		// leaked) key went on producing and authenticating on the Kafka
		// listener until its own expiry (redteam10 #2).
		g.credentials.FlushKeys(removed...)
	}
	cancelled := g.inflight.revoke(ctx, changes, g.view, now)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	g.metrics.appliedSeq.Set(float64(u.Seq))
	if u.Reset || len(changes.Raised) > 0 || changes.Revoked || changes.KeysChanged {
		g.log.Info("sync applied", zap.Uint64("seq", u.Seq), zap.Bool("reset", u.Reset), zap.Int("fences_raised", len(changes.Raised)),
			zap.Int("denied", len(u.Denied)), zap.Int("revoked_members", len(u.RevokedMembers)), zap.Int("qos", len(u.QoS)),
			zap.Bool("keys_changed", changes.KeysChanged), zap.Int("fetches_cancelled", cancelled))
	}
	if g.follower.Acked(sent, u.Seq) {
		g.log.Info("first sync done: ready", zap.Uint64("seq", g.view.Seq()))
	}
	return nil
}

// learn starts verifying tokens under the coordinator's settings s (new
// on this reset): a verifier of its own, with the view's keys, and no
// cached token verified under other settings.
func (g *Gateway) learn(s *guard.Settings) error {
	v, err := ocap.NewVerifier(s.VerifierConfig())
	if err != nil {
		return fmt.Errorf("sync: coordinator settings: %w", err)
	}
	v.SetKeys(g.view.Keys())
	if old := g.verifier.Swap(v); old != nil {
		// Every token verified under the old settings, capabilities and
		// credentials alike, and whatever key signed it (one removed by
		// this same reset included: redteam10 #2).
		g.cache.Flush()
		g.credentials.Flush()
	}
	g.settings = s
	g.log.Info("coordinator settings learned", zap.String("issuer", s.Issuer), zap.String("audience", s.Audience),
		zap.Duration("leeway", s.Leeway), zap.Duration("max_lease", s.MaxLease),
		zap.Duration("gateway_timeout", s.GatewayTimeout), zap.Duration("max_clock_skew", s.MaxClockSkew))
	if unfit := g.follower.Unfit(); unfit != nil {
		g.log.Error("not ready", zap.Error(unfit))
	}
	return nil
}

// audience is the gateway pool's name, as learned ("" before).
func (g *Gateway) audience() string {
	if v := g.follower.Settings(); v != nil {
		return v.Audience
	}
	return ""
}

// followsHint reports whether the next poll goes, without a pause, to
// the leader a not_leader answer named (leader; nil for other errors).
func followsHint(leader *string, next string, wait time.Duration) bool {
	if leader == nil || wait != 0 {
		return false
	}
	hint, err := coordinators.Normalize(*leader)
	return err == nil && hint == next
}

// notLeaderError is a 421 not_leader answer: the replica polled does not
// lead; leader names the one that does ("" when it does not know).
type notLeaderError struct {
	base, leader string
}

func (e *notLeaderError) Error() string {
	return fmt.Sprintf("sync: %s does not lead (leader %q)", e.base, e.leader)
}

// pollDeadline is when a poll sent at sent is given up. A coordinator
// holds a poll at most sync_wait, so one silent far longer is gone while
// its socket stays open (a paused replica, one cut off from the network
// in the middle): the gateway must ask the next replica early enough for
// that answer (held at most sync_wait too) to come before it self-fences,
// sync_timeout after it sent its last good poll (lastGood). Never sooner
// than sync_wait + 250 ms after sent — that margin doubled for each of
// the polls given up unanswered in a row before this one (silent) —
// never later than sync_timeout. A leader confirms a sync answer with a
// commit of its log (coordinator/sync.go), which on a starved machine
// takes 0.1-1.6 s: with the margin fixed, a gateway that had fallen
// behind gave up every poll at sync_wait + 250 ms, never resynced and
// refused every fetch out_of_sync for tens of seconds (e2e/ha at load
// 20-27, with or without a takeover). Timing decides only when the
// gateway moves on, never what it admits.
func pollDeadline(sent, lastGood time.Time, wait, timeout time.Duration, silent int) time.Time {
	d := lastGood.Add(timeout - wait - 500*time.Millisecond)
	margin := 250 * time.Millisecond << min(silent, 10)
	if least := sent.Add(wait + margin); d.Before(least) {
		d = least
	}
	if most := sent.Add(timeout); d.After(most) {
		d = most
	}
	return d
}

// errPollSilent marks a poll given up at its deadline (pollDeadline)
// with no answer begun.
var errPollSilent = errors.New("sync: no answer begun by the poll's deadline")

// poll sends one GET /v1/sync to the coordinator at base and decodes the
// answer; the request itself acknowledges after. It gives up at
// deadline (pollDeadline) if the coordinator has not begun to answer by
// then; an answer that began (a large reset on a busy machine) has until
// sync_timeout to arrive.
func (g *Gateway) poll(ctx context.Context, base string, after uint64, deadline time.Time) (api.SyncResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, g.cfg.SyncTimeout)
	defer cancel()
	var begun, gaveUp atomic.Bool
	silent := time.AfterFunc(time.Until(deadline), func() {
		if !begun.Load() {
			gaveUp.Store(true)
			cancel()
		}
	})
	defer silent.Stop()
	id := g.sync
	q := url.Values{"gateway": {id.id}, "instance": {id.instance}, "after": {strconv.FormatUint(after, 10)}, "wait_ms": {strconv.FormatInt(g.cfg.SyncWait.Milliseconds(), 10)}}
	resp, err := g.syncCall(ctx, http.MethodGet, base+"/v1/sync?"+q.Encode())
	begun.Store(true)
	if err != nil {
		if gaveUp.Load() {
			err = fmt.Errorf("%w: %w", errPollSilent, err)
		}
		return api.SyncResponse{}, err
	}
	defer resp.Body.Close()
	g.ackedSeq.Store(after)
	if resp.StatusCode != http.StatusOK {
		return api.SyncResponse{}, refusal(base, resp, resp.Body)
	}
	u, err := decodeSync(resp.Body, syncBodyMax) // strict: an update we cannot understand must not be acknowledged
	if err != nil {
		return api.SyncResponse{}, fmt.Errorf("sync: decode: %w", err)
	}
	return u, nil
}

// syncCall sends one sync-channel request with the sync credential.
func (g *Gateway) syncCall(ctx context.Context, method, rawURL string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, rawURL, nil)
	if err != nil {
		return nil, fmt.Errorf("sync: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+string(g.cfg.SyncToken))
	req.Header.Set("Accept", api.MediaJSON)
	resp, err := g.syncHTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("sync: %w", err)
	}
	return resp, nil
}

// refusal is the error of a non-200 sync answer: *notLeaderError for a
// 421 not_leader, *conflictError for a 409 conflict (another process
// holds this gateway's id).
func refusal(base string, resp *http.Response, body io.Reader) error {
	var e api.ErrorBody
	_ = json.NewDecoder(io.LimitReader(body, 64<<10)).Decode(&e)
	if resp.StatusCode == http.StatusMisdirectedRequest && e.Error.Code == api.CodeNotLeader {
		return &notLeaderError{base: base, leader: api.LeaderOf(resp.Header.Get(api.HeaderLeader), e.Error)}
	}
	if resp.StatusCode == http.StatusConflict && e.Error.Code == api.CodeConflict {
		return &conflictError{base: base, message: fmt.Sprintf("%.300s", e.Error.Message)}
	}
	return fmt.Errorf("sync: %s answered %d %s: %.200s", base, resp.StatusCode, e.Error.Code, e.Error.Message)
}

// leave tells the coordinator this gateway is gone (POST /v1/sync/leave),
// once it stopped serving and syncing: handoffs stop waiting for it at
// once instead of gateway_timeout. It follows not_leader like a poll and
// tries again until one answers or timeout ends: each attempt at most
// leaveAttemptMax (a frozen replica, its socket open, held the first
// attempt for the whole shutdown_timeout), and after every URL failed in
// a row a pause (100 ms doubling to 1 s: while a takeover is under way
// the standbys still name the dead leader, and six attempts in a row
// were spent in milliseconds); it gives up after a round in which no
// replica answered at all. A leave is idempotent, so an attempt
// given up on a slow leader costs nothing. Failing that the coordinator
// counts the gateway safe after gateway_timeout, as for a crash.
func (g *Gateway) leave(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	id := g.sync
	q := url.Values{"gateway": {id.id}, "instance": {id.instance}}
	pause, answered := 100*time.Millisecond, false
	for attempt := 1; ; attempt++ {
		base := g.coordinators.Current()
		err := g.leaveAt(ctx, base+"/v1/sync/leave?"+q.Encode(), base)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		var nl *notLeaderError
		if errors.As(err, &nl) {
			g.coordinators.NotLeader(base, nl.leader)
			answered = true
		} else {
			g.coordinators.Failed(base)
		}
		if attempt%len(g.coordinators.URLs()) == 0 {
			if !answered {
				return err // no replica answered at all: none is taking over
			}
			sleep(ctx, pause)
			pause, answered = min(2*pause, time.Second), false
		}
	}
}

// leaveAttemptMax bounds one attempt of leave.
const leaveAttemptMax = 2 * time.Second

// leaveAt sends one leave to u (base's), within leaveAttemptMax.
func (g *Gateway) leaveAt(ctx context.Context, u, base string) error {
	ctx, cancel := context.WithTimeout(ctx, leaveAttemptMax)
	defer cancel()
	resp, err := g.syncCall(ctx, http.MethodPost, u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	return refusal(base, resp, resp.Body)
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
