package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/capgate/capgate/api"
)

// Sync client bounds.
const (
	syncBackoffMin = 50 * time.Millisecond
	syncBackoffMax = time.Second
	syncBodyMax    = 64 << 20 // a snapshot of every fence and denied id
	cacheSweepEach = 30 * time.Second
)

// syncLoop long-polls the coordinator until ctx ends. Each answer is
// applied to the view, the verifier gets the new keys, fetches the update
// supersedes are cancelled and waited for, and only then the next poll,
// with after=seq, acknowledges it. Errors back off (jittered, bounded) and
// poll again with the same after; the gateway self-fences meanwhile once
// sync_timeout has passed (see syncRefusal).
func (g *Gateway) syncLoop(ctx context.Context) {
	defer close(g.syncDone)
	after := uint64(0) // 0 asks for a snapshot
	backoff := syncBackoffMin
	lastSweep := time.Now()
	for ctx.Err() == nil {
		sent := time.Now()
		update, err := g.poll(ctx, after)
		if err == nil {
			after, err = g.applySync(ctx, update, after)
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			g.metrics.syncPolls.WithLabelValues("error").Inc()
			g.log.Warn("sync failed", zap.Uint64("after", after), zap.Duration("retry_in", backoff), zap.Error(err))
			sleep(ctx, jitter(backoff))
			backoff = min(2*backoff, syncBackoffMax)
			continue
		}
		g.metrics.syncPolls.WithLabelValues("ok").Inc()
		backoff = syncBackoffMin
		g.markSynced(sent)
		if now := time.Now(); now.Sub(lastSweep) > cacheSweepEach {
			g.cache.Sweep(now)
			lastSweep = now
		}
	}
}

// applySync applies one answer and returns the after of the next poll.
func (g *Gateway) applySync(ctx context.Context, u api.SyncResponse, after uint64) (uint64, error) {
	if !u.Reset && u.Seq < after {
		// The coordinator forgot what we acknowledged: ask for a snapshot.
		return 0, fmt.Errorf("sync: sequence went back from %d to %d without a reset: asking for a snapshot", after, u.Seq)
	}
	now := time.Now()
	changes, err := g.view.Apply(u, now)
	if err != nil {
		return after, err
	}
	if changes.KeysChanged {
		removed := g.verifier.SetKeys(g.view.Keys())
		g.cache.FlushKeys(removed...)
	}
	cancelled := g.inflight.revoke(ctx, changes, g.view, now)
	g.metrics.appliedSeq.Set(float64(u.Seq))
	if u.Reset || len(changes.Raised) > 0 || changes.Revoked || changes.KeysChanged {
		g.log.Info("sync applied", zap.Uint64("seq", u.Seq), zap.Bool("reset", u.Reset), zap.Int("fences_raised", len(changes.Raised)),
			zap.Int("denied", len(u.Denied)), zap.Int("revoked_members", len(u.RevokedMembers)), zap.Int("qos", len(u.QoS)),
			zap.Bool("keys_changed", changes.KeysChanged), zap.Int("fetches_cancelled", cancelled))
	}
	return u.Seq, ctx.Err()
}

// markSynced records a successful poll sent at sent.
func (g *Gateway) markSynced(sent time.Time) {
	if g.lastSyncSent.Swap(sent.UnixNano()) == 0 {
		g.log.Info("first sync done: ready", zap.Uint64("seq", g.view.Seq()))
	}
}

// poll sends one GET /v1/sync and decodes the answer; the request itself
// acknowledges after.
func (g *Gateway) poll(ctx context.Context, after uint64) (api.SyncResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, g.cfg.SyncTimeout)
	defer cancel()
	q := url.Values{"gateway": {g.cfg.ID}, "after": {strconv.FormatUint(after, 10)}, "wait_ms": {strconv.FormatInt(g.cfg.SyncWait.Milliseconds(), 10)}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.cfg.CoordinatorURL+"/v1/sync?"+q.Encode(), nil)
	if err != nil {
		return api.SyncResponse{}, fmt.Errorf("sync: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+string(g.cfg.SyncToken))
	req.Header.Set("Accept", api.MediaJSON)
	resp, err := g.syncHTTP.Do(req)
	if err != nil {
		return api.SyncResponse{}, fmt.Errorf("sync: %w", err)
	}
	defer resp.Body.Close()
	g.ackedSeq.Store(after)
	body := io.LimitReader(resp.Body, syncBodyMax)
	if resp.StatusCode != http.StatusOK {
		var e api.ErrorBody
		_ = json.NewDecoder(body).Decode(&e)
		return api.SyncResponse{}, fmt.Errorf("sync: coordinator answered %d %s: %.200s", resp.StatusCode, e.Error.Code, e.Error.Message)
	}
	var u api.SyncResponse
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields() // an update we cannot understand must not be acknowledged
	if err := dec.Decode(&u); err != nil {
		return api.SyncResponse{}, fmt.Errorf("sync: decode: %w", err)
	}
	return u, nil
}

func jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2+1)
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
