package stack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/internal/coordinators"
)

// Admin sends an admin API request to the coordinator (in as JSON unless
// nil) and decodes a 2xx answer into out (unless nil). It returns the
// status and the raw body; a transport or decoding failure is an error, a
// non-2xx status is not.
//
// With replicas it goes through the replicas' URL list as the CLI does
// (client.NewLeaderTransport: not_leader followed within the call, the
// next URL after a failure), each attempt's answer awaited at most 2 s,
// so a paused (SIGSTOP) or dead replica costs one attempt, not the call.
func (s *Stack) Admin(ctx context.Context, method, path string, in, out any) (int, []byte, error) {
	if !s.opts.replicas() {
		return DoJSON(ctx, s.http, method, s.CoordinatorURL()+path, s.AdminToken, in, out)
	}
	s.adminOnce.Do(func() {
		base, ok := s.http.Transport.(*http.Transport)
		if !ok {
			base = http.DefaultTransport.(*http.Transport)
		}
		next := base.Clone()
		next.ResponseHeaderTimeout = 2 * time.Second
		rt, err := client.NewLeaderTransport(s.CoordinatorURLs(), next)
		s.adminHTTP, s.adminErr = &http.Client{Timeout: s.http.Timeout, Transport: rt}, err
	})
	if s.adminErr != nil {
		return 0, nil, fmt.Errorf("stack: admin: %w", s.adminErr)
	}
	// The transport moves to the next replica after a refused connection
	// or a 5xx but hands that answer back: try again, once per replica
	// and a round more (a takeover in progress answers 503 for a moment).
	// A 421 is every replica saying not_leader with no leader to follow:
	// an election under way. No replica acted on the request, so it is
	// sent again, any method, with a backoff, until one leads or
	// adminRetry's budget passed (the CLI's rule, coordinators.Retry);
	// then the error says so.
	urls := s.CoordinatorURLs()
	retry := adminRetry
	for attempt := 0; ; {
		status, raw, err := DoJSON(ctx, s.adminHTTP, method, urls[0]+path, s.AdminToken, in, out)
		var wait time.Duration
		switch {
		case ctx.Err() != nil:
			return status, raw, err
		case err == nil && status == http.StatusMisdirectedRequest:
			var again bool
			if wait, again = retry.Next(time.Now(), method, coordinators.NoLeader); !again {
				return status, raw, fmt.Errorf("stack: admin %s %s: %d %.300s (%s)", method, path, status, raw, retry.GaveUp(time.Now(), method))
			}
		case (err == nil && status < 500) || attempt >= 2*len(urls):
			return status, raw, err
		default:
			attempt++
			wait = 50 * time.Millisecond
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

// adminRetry bounds Admin's retries of a request no replica would take
// (421 without a leader): an election in a stack on a starved machine
// may take several seconds (lost2's runs).
var adminRetry = coordinators.Retry{Budget: 20 * time.Second, Base: 50 * time.Millisecond, Max: 500 * time.Millisecond}

// DoJSON is one JSON request with a bearer token (in as JSON unless nil);
// a 2xx answer is decoded into out (unless nil). It returns the status and
// the raw body; a non-2xx status is not an error.
func DoJSON(ctx context.Context, hc *http.Client, method, u, bearer string, in, out any) (int, []byte, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, nil, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return 0, nil, err
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, u, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("%s %s: %w", method, u, err)
	}
	if out != nil && resp.StatusCode/100 == 2 {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, raw, fmt.Errorf("%s %s: decode %.200s: %w", method, u, raw, err)
		}
	}
	return resp.StatusCode, raw, nil
}

// MustAdmin is Admin with a non-2xx answer as an error.
func (s *Stack) MustAdmin(ctx context.Context, method, path string, in, out any) error {
	status, raw, err := s.Admin(ctx, method, path, in, out)
	if err == nil && status/100 != 2 {
		err = fmt.Errorf("admin %s %s: %d %s", method, path, status, raw)
	}
	return err
}

// ClientCredential mints a client credential named name for groups and
// topics through the admin API.
func (s *Stack) ClientCredential(ctx context.Context, name string, groups, topics []string, ttl time.Duration) (string, error) {
	var resp coordinator.ClientResponse
	err := s.MustAdmin(ctx, http.MethodPost, "/v1/admin/clients",
		coordinator.ClientRequest{Name: name, Groups: groups, Topics: topics, TTLMs: ttl.Milliseconds()}, &resp)
	return resp.Credential, err
}

// Describe returns GET /v1/admin/groups/{group}.
func (s *Stack) Describe(ctx context.Context, group string) (coordinator.GroupDescription, error) {
	var d coordinator.GroupDescription
	err := s.MustAdmin(ctx, http.MethodGet, "/v1/admin/groups/"+url.PathEscape(group), nil, &d)
	return d, err
}

// Acked reports whether every gateway of the stack acknowledged sync seq
// (GET /v1/admin/gateways), naming one that did not.
func (s *Stack) Acked(ctx context.Context, seq uint64) (bool, string, error) {
	var now coordinator.GatewaysResponse
	if err := s.MustAdmin(ctx, http.MethodGet, "/v1/admin/gateways", nil, &now); err != nil {
		return false, "", err
	}
	acked := map[string]uint64{}
	for _, g := range now.Gateways {
		acked[g.ID] = g.Acked
	}
	for _, g := range s.Gateways() {
		if acked[g.ID] < seq {
			return false, fmt.Sprintf("%s acked %d of %d", g.ID, acked[g.ID], seq), nil
		}
	}
	return true, "", nil
}

// SyncSeq is the coordinator's current sync sequence.
func (s *Stack) SyncSeq(ctx context.Context) (uint64, error) {
	var now coordinator.GatewaysResponse
	err := s.MustAdmin(ctx, http.MethodGet, "/v1/admin/gateways", nil, &now)
	return now.Seq, err
}

// ClientConfig is an SDK consumer configuration pointed at the stack (the
// first coordinator — with replicas the leader, then the others — and
// every gateway) for group and topics, with the
// stack's timing.
func (s *Stack) ClientConfig(group string, topics []string, credential string) client.Config {
	cfg := client.DefaultConfig()
	cfg.CoordinatorURL, cfg.Gateways = s.CoordinatorURL(), s.GatewayURLs()
	if s.opts.replicas() {
		for _, u := range s.CoordinatorURLs() { // the SDK follows not_leader among them
			if u != cfg.CoordinatorURL {
				cfg.CoordinatorURLs = append(cfg.CoordinatorURLs, u)
			}
		}
	}
	cfg.Group, cfg.Topics, cfg.Credential = group, topics, credential
	cfg.TLS = s.opts.ClientTLS
	s.opts.Timing.applyClient(&cfg)
	return cfg
}
