package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client/driver"
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
//
// One call sends to each listed replica at most once
// (coordinators.Call), so it ends after at most as many attempts as URLs
// listed, having tried every replica: while another call's 421 from a
// standby that still names a dead leader moves the shared list back to
// it, this call neither retries that leader nor follows the hint to it.
// A replica that cannot be connected to (refused, timed out or not
// resolved while dialling: unsent) is skipped within the call: the
// request goes to the next URL, so one call succeeds while any listed
// replica is reachable and leads (or names the leader). That is safe
// for every method, a POST too, because no byte of the request left
// this process. It lives here, not in each caller, because every
// coordinator call passes here (the SDK, GroupAPI, each of the CLI's
// one-shot admin commands) and this already re-sends a body for
// not_leader; callers that retry (the SDK's driver) only save a retry
// and its backoff. Any other transport error (the connection broke
// after the request may have reached a server) or a 5xx still moves
// the list on and is returned to the caller, as before: a
// non-idempotent request is never sent twice here. When every replica
// was tried, the call returns the last not_leader answer (the caller's
// retry backs off), or, when none answered, an error naming each URL
// once and why it could not be reached.
func (t *leaderTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.mu.Lock()
	_, rest, ok := t.list.Base(req.URL.String())
	if ok && req.Context().Value(movingOnKey{}) != nil {
		t.list.Failed(t.list.Current())
	}
	call := t.list.Call()
	t.mu.Unlock()
	if !ok {
		return t.next.RoundTrip(req)
	}
	var unreachable unreachableError
	var notLeader *http.Response // the last 421, its body read
	for {
		t.mu.Lock()
		base, more := call.Next()
		t.mu.Unlock()
		if !more {
			return unreachable.end(notLeader)
		}
		out, err := redirect(req, base+rest)
		if err != nil {
			return nil, err
		}
		resp, err := t.next.RoundTrip(out)
		if err != nil || resp.StatusCode >= 500 {
			t.mu.Lock()
			t.list.Failed(base)
			t.mu.Unlock()
			if err != nil && unsent(err) && req.Context().Err() == nil && replayable(req) {
				unreachable.add(base, err)
				continue // nothing was sent: try the next replica
			}
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
		call.NotLeader(base, leader)
		t.mu.Unlock()
		if !replayable(req) {
			return kept, nil // the caller's retry backs off (not_leader is retriable)
		}
		notLeader = kept
	}
}

// movingOnKey marks a call's context (movingOn).
type movingOnKey struct{}

// movingOn marks a coordinator call as a hedge (driver.Send.Hedge): an
// earlier attempt of the same request is held silent by the replica in
// use, so this call starts at the next one, as the next attempt after a
// failed one does. A leader that is only slow is reached again through
// the standby's not_leader (one round trip more).
func movingOn(ctx context.Context, s driver.Send) context.Context {
	if !s.Hedge {
		return ctx
	}
	return context.WithValue(ctx, movingOnKey{}, true)
}

// replayable reports whether req's body (if any) can be sent again.
func replayable(req *http.Request) bool {
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// unreachableError is a call that reached no replica: each URL tried
// and why it could not be connected to.
type unreachableError struct {
	urls []string
	errs []error
}

// add records one failed attempt; a call makes at most one per URL of
// the list (coordinators.Call), so each URL is here once at most.
func (e *unreachableError) add(url string, err error) {
	e.urls, e.errs = append(e.urls, url), append(e.errs, err)
}

// end is a call's answer once it tried every replica: the last
// not_leader, if one answered; else e, or with one URL listed its
// error alone.
func (e *unreachableError) end(notLeader *http.Response) (*http.Response, error) {
	switch {
	case notLeader != nil:
		return notLeader, nil
	case len(e.errs) == 1:
		return nil, e.errs[0]
	}
	return nil, e
}

func (e *unreachableError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "no coordinator replica reachable (tried %s)", strings.Join(e.urls, ", "))
	for i, u := range e.urls {
		fmt.Fprintf(&b, "; %s: %v", u, e.errs[i])
	}
	return b.String()
}

// Unwrap lets errors.As find each attempt's *net.OpError.
func (e *unreachableError) Unwrap() []error { return e.errs }

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
