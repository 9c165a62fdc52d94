package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/capgate/capgate/api"
)

// SyncTap is a passive HTTP proxy between the gateways and the
// coordinator's sync channel: every poll (whose after acknowledges a seq)
// and every answer (seq, reset, fences) is recorded in the Log, so the
// checkers know exactly which fence each gateway received and when it
// acknowledged it. It is not a gateway: the coordinator never waits for
// it, and it forwards at once unless a test asks it to hold traffic
// (HoldAnswers, HoldAcks) to stop a handoff at a chosen step. Safe for
// concurrent use.
type SyncTap struct {
	log      *Log
	upstream string
	client   *http.Client
	server   *http.Server
	ln       net.Listener

	mu          sync.Mutex
	holdAnswers func(api.Fence) bool
	holdAcks    func(api.Fence) bool
	fenced      map[string]bool // gateways answered a fence holdAcks matches
	episode     *holdEpisode
	held        int
}

// holdEpisode is one period of holding: everything held in it is let go
// together, forwarded or dropped.
type holdEpisode struct {
	done chan struct{}
	drop bool
}

// StartSyncTap listens on 127.0.0.1 and forwards to upstream (the
// coordinator's base URL).
func StartSyncTap(log *Log, upstream string) (*SyncTap, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("harness: sync tap: %w", err)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = 64
	transport.DisableCompression = true
	t := &SyncTap{
		log: log, upstream: upstream, ln: ln,
		client:  &http.Client{Transport: transport},
		fenced:  map[string]bool{},
		episode: &holdEpisode{done: make(chan struct{})},
	}
	t.server = &http.Server{Handler: t, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	go func() { _ = t.server.Serve(ln) }()
	return t, nil
}

// URL is the tap's base URL: the gateways' coordinator_url (or their
// proxies' target).
func (t *SyncTap) URL() string { return "http://" + t.ln.Addr().String() }

// Addr is the tap's host:port.
func (t *SyncTap) Addr() string { return t.ln.Addr().String() }

// Close stops the tap.
func (t *SyncTap) Close() {
	t.Drop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = t.server.Shutdown(ctx)
	_ = t.server.Close()
	t.client.CloseIdleConnections()
}

// HoldAnswers holds every sync answer carrying a fence that match accepts,
// so the gateways do not learn of it, until Release or Drop.
func (t *SyncTap) HoldAnswers(match func(api.Fence) bool) {
	t.mu.Lock()
	t.holdAnswers = match
	t.mu.Unlock()
}

// HoldAcks lets answers through but, once a gateway was answered a fence
// that match accepts, holds its next polls (the first acknowledges the
// fence) until Release or Drop.
func (t *SyncTap) HoldAcks(match func(api.Fence) bool) {
	t.mu.Lock()
	t.holdAcks = match
	t.mu.Unlock()
}

// Held is how many answers and polls are held now.
func (t *SyncTap) Held() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.held
}

// Release stops holding and forwards everything held.
func (t *SyncTap) Release() { t.endEpisode(false) }

// Drop stops holding and cuts the connections of everything held, as a
// coordinator that died would have: the gateways see a failed poll.
func (t *SyncTap) Drop() { t.endEpisode(true) }

func (t *SyncTap) endEpisode(drop bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.holdAnswers, t.holdAcks = nil, nil
	t.fenced = map[string]bool{}
	t.episode.drop = drop
	close(t.episode.done)
	t.episode = &holdEpisode{done: make(chan struct{})}
}

// wait parks a held request until its episode ends; false means drop it.
func (t *SyncTap) wait(ctx context.Context, e *holdEpisode) bool {
	defer func() {
		t.mu.Lock()
		t.held--
		t.mu.Unlock()
	}()
	select {
	case <-e.done:
		return !e.drop
	case <-ctx.Done():
		return false
	}
}

// ServeHTTP forwards one request, recording sync traffic.
func (t *SyncTap) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v1/sync/leave" {
		t.log.AddGatewayLeave(GatewayLeave{Gateway: r.URL.Query().Get("gateway"), Sent: Now()})
	}
	if r.URL.Path != "/v1/sync" {
		t.forwardPlain(w, r)
		return
	}
	q := r.URL.Query()
	gateway := q.Get("gateway")
	after, _ := strconv.ParseUint(q.Get("after"), 10, 64)
	poll := SyncPoll{Gateway: gateway, After: after, Arrived: Now()}
	t.mu.Lock()
	hold, episode := t.holdAcks != nil && t.fenced[gateway], t.episode
	if hold {
		t.held++
	}
	t.mu.Unlock()
	if hold && !t.wait(r.Context(), episode) {
		t.log.AddSyncPoll(poll)
		panic(http.ErrAbortHandler)
	}
	poll.Forwarded = Now()
	t.log.AddSyncPoll(poll)
	status, header, body, err := t.roundTrip(r)
	if err == nil && status == http.StatusMisdirectedRequest {
		t.log.MarkNotLeader(poll)
	}
	if err != nil {
		panic(http.ErrAbortHandler) // as a dead coordinator: the gateway's poll fails
	}
	var answer api.SyncResponse
	if status == http.StatusOK && json.Unmarshal(body, &answer) == nil && !t.passAnswer(r.Context(), gateway, answer) {
		panic(http.ErrAbortHandler)
	}
	if status == http.StatusOK {
		t.log.AddSyncAnswer(SyncAnswer{Gateway: gateway, Seq: answer.Seq, Reset: answer.Reset, Fences: answer.Fences, At: Now()})
	}
	writeAnswer(w, status, header, body)
}

// passAnswer applies the hold rules to an answer; false means drop it.
func (t *SyncTap) passAnswer(ctx context.Context, gateway string, answer api.SyncResponse) bool {
	t.mu.Lock()
	holdAnswer := t.holdAnswers != nil && anyFence(answer.Fences, t.holdAnswers)
	if t.holdAcks != nil && anyFence(answer.Fences, t.holdAcks) {
		t.fenced[gateway] = true
	}
	episode := t.episode
	if holdAnswer {
		t.held++
	}
	t.mu.Unlock()
	return !holdAnswer || t.wait(ctx, episode)
}

func anyFence(fences []api.Fence, match func(api.Fence) bool) bool {
	for _, f := range fences {
		if match(f) {
			return true
		}
	}
	return false
}

// roundTrip sends r to the coordinator and reads the whole answer.
func (t *SyncTap) roundTrip(r *http.Request) (int, http.Header, []byte, error) {
	req, err := http.NewRequestWithContext(r.Context(), r.Method, t.upstream+r.URL.RequestURI(), r.Body)
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header = r.Header.Clone()
	resp, err := t.client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, nil, err
	}
	return resp.StatusCode, resp.Header, body, nil
}

func (t *SyncTap) forwardPlain(w http.ResponseWriter, r *http.Request) {
	status, header, body, err := t.roundTrip(r)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return
		}
		panic(http.ErrAbortHandler)
	}
	writeAnswer(w, status, header, body)
}

func writeAnswer(w http.ResponseWriter, status int, header http.Header, body []byte) {
	for k, vs := range header {
		if k == "Content-Length" || k == "Connection" {
			continue
		}
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
