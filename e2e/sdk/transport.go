package sdk

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/capgate/capgate/e2e/harness"
)

// ErrKilled is what every request of a killed member fails with.
var ErrKilled = errors.New("e2e: member killed: transport blocked")

// FetchCall is one fetch request a member sent to a gateway, as seen on
// the wire.
type FetchCall struct {
	Gateway   string // base URL
	Partition int32
	Offset    int64
	Epoch     uint64 // the capability's ep (decoded, not verified)
	JTI       string
	Expires   time.Time // the capability's exp
	Sent      time.Time
	Done      time.Time // when the status line arrived (or the error)
	Status    int       // 0 on a transport error (Err)
	Err       string
	// NextOffset is the Capgate-Next-Offset header of a 200.
	NextOffset int64
	// Body is the error body of a non-2xx answer.
	Body string
}

// Transport is a member's http.RoundTripper: it records every fetch and
// every coordinator call, and can be blocked for good (Kill), which also
// cuts every request in flight. Safe for concurrent use.
type Transport struct {
	base *http.Transport

	mu       sync.Mutex
	fetches  []FetchCall
	calls    map[string]int           // coordinator calls by kind, sent
	inflight map[string]int           // coordinator calls by kind, not answered yet
	holds    map[string]chan struct{} // kinds held back until closed

	killed context.Context // done once killed
	kill   context.CancelFunc
}

// NewTransport wraps a fresh keep-alive transport.
func NewTransport() *Transport {
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.MaxIdleConnsPerHost = 256
	killed, kill := context.WithCancel(context.Background())
	return &Transport{
		base: base, calls: map[string]int{}, inflight: map[string]int{},
		holds: map[string]chan struct{}{}, killed: killed, kill: kill,
	}
}

// Kill blocks the transport: requests in flight are cut, new ones fail.
func (tr *Transport) Kill() { tr.kill() }

// RoundTrip implements http.RoundTripper.
func (tr *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if tr.killed.Err() != nil {
		return nil, ErrKilled
	}
	// The request's context also ends at Kill; closing the body releases it.
	ctx, cancel := context.WithCancel(req.Context())
	stop := context.AfterFunc(tr.killed, cancel)
	release := func() { stop(); cancel() }
	fetch, isFetch := fetchOf(req)
	kind := req.URL.Path[strings.LastIndex(req.URL.Path, "/")+1:]
	if !isFetch {
		if err := tr.admit(ctx, kind); err != nil {
			release()
			return nil, err
		}
	}
	resp, err := tr.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		release()
	} else {
		resp.Body = &releaseBody{ReadCloser: resp.Body, release: release}
	}
	if isFetch {
		tr.recordFetch(fetch, resp, err)
	} else {
		tr.mu.Lock()
		tr.inflight[kind]--
		tr.mu.Unlock()
	}
	return resp, err
}

type releaseBody struct {
	io.ReadCloser
	release func()
}

func (b *releaseBody) Close() error {
	err := b.ReadCloser.Close()
	b.release()
	return err
}

// admit waits while calls of kind are held, then counts the call as
// sent and in flight.
func (tr *Transport) admit(ctx context.Context, kind string) error {
	for {
		tr.mu.Lock()
		gate := tr.holds[kind]
		if gate == nil {
			tr.calls[kind]++
			tr.inflight[kind]++
			tr.mu.Unlock()
			return nil
		}
		tr.mu.Unlock()
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Hold keeps coordinator calls of kind (the path's last segment:
// "heartbeat", "commit", "join", "leave") from being sent until release
// is called; calls already sent are not affected.
func (tr *Transport) Hold(kind string) (release func()) {
	gate := make(chan struct{})
	tr.mu.Lock()
	tr.holds[kind] = gate
	tr.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			tr.mu.Lock()
			delete(tr.holds, kind)
			tr.mu.Unlock()
			close(gate)
		})
	}
}

// InFlight is the number of coordinator calls of kind sent and not yet
// answered.
func (tr *Transport) InFlight(kind string) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.inflight[kind]
}

func (tr *Transport) recordFetch(f FetchCall, resp *http.Response, err error) {
	f.Done = time.Now()
	if err != nil {
		f.Err = err.Error()
	} else {
		f.Status = resp.StatusCode
		if n, perr := strconv.ParseInt(resp.Header.Get("Capgate-Next-Offset"), 10, 64); perr == nil {
			f.NextOffset = n
		}
		if f.Status/100 != 2 {
			f.Body = peekBody(resp)
		}
	}
	tr.mu.Lock()
	tr.fetches = append(tr.fetches, f)
	tr.mu.Unlock()
}

// fetchOf decodes a fetch request: GET /v1/topics/{t}/partitions/{p}/records.
func fetchOf(req *http.Request) (FetchCall, bool) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	if req.Method != http.MethodGet || len(parts) != 6 || parts[1] != "topics" || parts[5] != "records" {
		return FetchCall{}, false
	}
	p, _ := strconv.ParseInt(parts[4], 10, 32)
	off, _ := strconv.ParseInt(req.URL.Query().Get("offset"), 10, 64)
	f := FetchCall{
		Gateway:   req.URL.Scheme + "://" + req.URL.Host,
		Partition: int32(p), Offset: off, Sent: time.Now(),
	}
	claims := CapabilityClaims(strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer "))
	f.Epoch, f.JTI, f.Expires = claims.Epoch, claims.JTI, time.Unix(claims.Exp, 0)
	return f, true
}

// Claims are the capability claims the tests look at.
type Claims = harness.TokenClaims

// CapabilityClaims decodes a token's payload without verifying it.
func CapabilityClaims(token string) Claims { return harness.ClaimsOf(token) }

// peekBody reads the start of an error body and puts it back for the
// client.
func peekBody(resp *http.Response) string {
	head, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
	return string(head)
}

// CloseIdleConnections closes the kept-alive connections. A connection
// dialled for a request cancelled meanwhile sits idle without ever having
// carried a request, and fasthttp's graceful shutdown waits 5s for such a
// connection before it closes it: cleanups close them first.
func (tr *Transport) CloseIdleConnections() {
	tr.base.CloseIdleConnections()
}

// Fetches returns a copy of the fetches recorded so far.
func (tr *Transport) Fetches() []FetchCall {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]FetchCall(nil), tr.fetches...)
}

// Calls returns how many coordinator calls of a kind (join, heartbeat,
// commit, leave) were sent.
func (tr *Transport) Calls(kind string) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.calls[kind]
}
