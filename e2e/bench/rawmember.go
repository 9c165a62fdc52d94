package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/internal/stack"
)

// rawMember is a group member spoken over plain HTTP, without the SDK:
// it joins, holds long-poll heartbeats, and releases what is revoked at
// once (committing the grant's start offset). It fetches nothing. Safe for
// concurrent use.
type rawMember struct {
	hc             *http.Client
	coordinatorURL string
	group          string
	ID, token      string

	mu     sync.Mutex
	grants map[int32]api.Grant
	// lateReleases counts release commits refused 409 (stale_epoch).
	lateReleases atomic.Int64
	// refused counts requests answered 429 and sent again after their
	// Retry-After, as the SDK does.
	refused atomic.Int64
}

// joinRaw joins group for topic with the client credential.
func joinRaw(ctx context.Context, hc *http.Client, coordinatorURL, group, topic, credential string, sessionMs int64) (*rawMember, error) {
	m := &rawMember{hc: hc, coordinatorURL: coordinatorURL, group: group, grants: map[int32]api.Grant{}}
	var resp api.JoinResponse
	req := api.JoinRequest{ClientID: "bench", Topics: []string{topic}, SessionTimeoutMs: sessionMs}
	if _, err := m.post(ctx, "join", credential, req, &resp); err != nil {
		return nil, err
	}
	m.ID, m.token = resp.MemberID, resp.MemberToken
	m.apply(api.HeartbeatResponse{Grants: resp.Grants})
	return m, nil
}

// post sends one request; one answered 429 (a tenant bound: the loop's
// share, the tenant's rate) is sent again after its Retry-After, as the
// SDK does — a raw member that gave up on it ended a loaded storm that
// a real consumer would have ridden out.
func (m *rawMember) post(ctx context.Context, action, bearer string, in, out any) (int, error) {
	u := m.coordinatorURL + "/v1/groups/" + url.PathEscape(m.group) + "/" + action
	for {
		status, raw, err := stack.DoJSON(ctx, m.hc, http.MethodPost, u, bearer, in, out)
		if status != http.StatusTooManyRequests {
			if err == nil && status/100 != 2 {
				err = fmt.Errorf("POST %s: %d %s", u, status, raw)
			}
			return status, err
		}
		m.refused.Add(1)
		var refusal struct {
			Error struct {
				RetryAfterMs int64 `json:"retry_after_ms"`
			} `json:"error"`
		}
		wait := time.Second
		if json.Unmarshal(raw, &refusal) == nil && refusal.Error.RetryAfterMs > 0 {
			wait = time.Duration(refusal.Error.RetryAfterMs) * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return status, err
		case <-time.After(wait):
		}
	}
}

// held returns how many partitions the member holds.
func (m *rawMember) held() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.grants)
}

// capabilityBytes is the size of the capabilities the member keeps.
func (m *rawMember) capabilityBytes() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, g := range m.grants {
		n += len(g.Capability)
	}
	return n
}

// apply takes news in and returns the revoked grants (to release).
func (m *rawMember) apply(news api.HeartbeatResponse) []api.Grant {
	m.mu.Lock()
	defer m.mu.Unlock()
	var released []api.Grant
	for _, ref := range news.Revoke {
		if g, ok := m.grants[ref.Partition]; ok && g.Epoch == ref.Epoch {
			released = append(released, g)
			delete(m.grants, ref.Partition)
		}
	}
	for _, list := range [][]api.Grant{news.Grants, news.Renew} {
		for _, g := range list {
			if old, ok := m.grants[g.Partition]; !ok || old.Epoch <= g.Epoch {
				m.grants[g.Partition] = g
			}
		}
	}
	return released
}

// heartbeat sends one heartbeat held up to waitMs, applies the news and
// releases what was revoked; it returns the news.
func (m *rawMember) heartbeat(ctx context.Context, waitMs int64) (api.HeartbeatResponse, error) {
	var news api.HeartbeatResponse
	if _, err := m.post(ctx, "heartbeat", m.token, api.HeartbeatRequest{WaitMs: waitMs}, &news); err != nil {
		return news, err
	}
	if released := m.apply(news); len(released) > 0 {
		if err := m.release(ctx, released); err != nil {
			return news, err
		}
	}
	return news, nil
}

// releaseChunk bounds one release commit: every offset carries a
// capability (~700 bytes), and the coordinator refuses bodies over
// max_body_bytes (1 MiB by default) with 413.
const releaseChunk = 500

// release commits each revoked partition's start offset with its old
// capability and releases it (PartitionCommitted).
func (m *rawMember) release(ctx context.Context, grants []api.Grant) error {
	for len(grants) > 0 {
		chunk := grants[:min(releaseChunk, len(grants))]
		grants = grants[len(chunk):]
		req := api.CommitRequest{Release: true}
		for _, g := range chunk {
			req.Offsets = append(req.Offsets, api.CommitOffset{Topic: g.Topic, Partition: g.Partition, Offset: max(g.Offset, 0), Capability: g.Capability})
		}
		status, err := m.post(ctx, "commit", m.token, req, nil)
		if status == http.StatusConflict {
			// Too late (handoff_timeout moved it already): as the SDK does,
			// the release counts as done.
			m.lateReleases.Add(1)
			continue
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// loop heartbeats until ctx ends, calling onNews after each answer.
func (m *rawMember) loop(ctx context.Context, waitMs int64, onNews func(*rawMember, api.HeartbeatResponse)) error {
	for {
		news, err := m.heartbeat(ctx, waitMs)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		onNews(m, news)
	}
}
