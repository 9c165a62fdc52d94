package client

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/internal/coordinators"
)

// maxNotLeaderBody bounds the 421 body read for its leader hint.
const maxNotLeaderBody = 64 << 10

// leaderTransport sends requests addressed to any of the configured
// coordinator replicas to the one in use, and follows a replica's 421
// not_leader to the leader it names within the same call: one more round
// trip, and every later request goes there directly. The decisions are
// internal/coordinators' (a hint outside the list is never followed, so a
// credential only goes where the user said); this is the shell around
// them. Requests to other URLs (gateways) pass through untouched.
//
// Written as an http.RoundTripper so every coordinator call of the SDK,
// the gateway's group sessions (GroupAPI) and the CLI's admin client
// follow replicas without each carrying its own loop. Safe for
// concurrent use.
type leaderTransport struct {
	next http.RoundTripper
	mu   sync.Mutex
	list *coordinators.List
}

// NewLeaderTransport wraps next (nil: http.DefaultTransport) for the
// coordinator replicas at urls.
func NewLeaderTransport(urls []string, next http.RoundTripper) (http.RoundTripper, error) {
	list, err := coordinators.New(urls)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	if next == nil {
		next = http.DefaultTransport
	}
	return &leaderTransport{next: next, list: list}, nil
}

// WithCoordinators returns a copy of hc whose transport follows the
// coordinator replicas at urls (see NewLeaderTransport); hc is unchanged.
func WithCoordinators(hc *http.Client, urls []string) (*http.Client, error) {
	rt, err := NewLeaderTransport(urls, hc.Transport)
	if err != nil {
		return nil, err
	}
	out := *hc
	out.Transport = rt
	return &out, nil
}

// RoundTrip implements http.RoundTripper.
func (t *leaderTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.mu.Lock()
	_, rest, ok := t.list.Base(req.URL.String())
	t.mu.Unlock()
	if !ok {
		return t.next.RoundTrip(req)
	}
	for {
		t.mu.Lock()
		base := t.list.Current()
		t.mu.Unlock()
		out, err := redirect(req, base+rest)
		if err != nil {
			return nil, err
		}
		resp, err := t.next.RoundTrip(out)
		if err != nil || resp.StatusCode >= 500 {
			t.mu.Lock()
			t.list.Failed(base)
			t.mu.Unlock()
			return resp, err
		}
		if resp.StatusCode != http.StatusMisdirectedRequest {
			t.mu.Lock()
			t.list.Succeeded(base)
			t.mu.Unlock()
			return resp, nil
		}
		leader, kept := notLeaderHint(resp)
		t.mu.Lock()
		_, backoff := t.list.NotLeader(base, leader)
		t.mu.Unlock()
		if backoff || req.Body != nil && req.GetBody == nil {
			return kept, nil // the caller's retry backs off (not_leader is retriable)
		}
	}
}

// redirect is req sent to rawURL instead, with a fresh body.
func redirect(req *http.Request, rawURL string) (*http.Request, error) {
	out := req.Clone(req.Context())
	u, err := req.URL.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("client: coordinator URL %q: %w", rawURL, err)
	}
	out.URL, out.Host = u, ""
	if req.GetBody != nil {
		if out.Body, err = req.GetBody(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// notLeaderHint reads a 421's leader (the Capgate-Leader header, else the
// body's leader detail) and returns the response with its body intact.
func notLeaderHint(resp *http.Response) (string, *http.Response) {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxNotLeaderBody))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	var e api.ErrorBody
	_ = json.Unmarshal(b, &e)
	return api.LeaderOf(resp.Header.Get(api.HeaderLeader), e.Error), resp
}

// CloseIdleConnections closes the wrapped transport's idle connections.
func (t *leaderTransport) CloseIdleConnections() {
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
