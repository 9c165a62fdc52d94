package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client/driver"
	"github.com/capgate/capgate/tlsconf"
)

// maxCoordinatorBody bounds a coordinator answer.
const maxCoordinatorBody = 16 << 20

// newHTTPClient is the default client: keep-alive connections enough for
// idlePerHost requests in flight to one host (a consumer's
// GatewayFetchesMax) plus the heartbeat and commits, so the connections
// of a burst of long polls ending together are used again instead of
// closed and dialled anew; tc (nil: defaults) for https:// URLs.
func newHTTPClient(tc *tlsconf.Client, idlePerHost int) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = max(idlePerHost, 256) + 16
	t.MaxIdleConns = 0 // no bound across hosts: each host's is
	tc.Apply(t)
	return &http.Client{Transport: t}
}

// transport sends capgate requests: bearer token, JSON bodies, refusals
// decoded into *Error.
type transport struct {
	http    *http.Client
	backoff backoff
}

// do sends one request and reads the whole answer (up to limit bytes). A
// non-2xx answer is returned as *Error; the body is returned on success.
func (t *transport) do(ctx context.Context, op string, req request, limit int64) (*http.Response, []byte, error) {
	var body io.Reader
	if req.body != nil {
		body = bytes.NewReader(req.body)
	}
	hr, err := http.NewRequestWithContext(ctx, req.method, req.url, body)
	if err != nil {
		return nil, nil, fmt.Errorf("client: %s: %w", op, err)
	}
	if req.body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	if req.accept != "" {
		hr.Header.Set("Accept", req.accept)
	}
	if req.bearer != "" {
		hr.Header.Set("Authorization", "Bearer "+req.bearer)
	}
	if req.joinKey != "" {
		hr.Header.Set(api.HeaderIdempotencyKey, `"`+req.joinKey+`"`) // the IETF draft's sf-string
	}
	resp, err := t.http.Do(hr)
	if err != nil {
		if se := schemeOfFailure(op, hr, err); se != nil {
			return nil, nil, se
		}
		return nil, nil, fmt.Errorf("client: %s: %w", op, err)
	}
	defer resp.Body.Close()
	ok := resp.StatusCode >= 200 && resp.StatusCode <= 299
	if ok && req.onHeaders != nil {
		req.onHeaders(resp.Header)
	}
	b, err := readBody(resp, limit)
	switch {
	case err != nil:
		return nil, nil, fmt.Errorf("client: %s: read answer: %w", op, err)
	case int64(len(b)) > limit:
		return nil, nil, fmt.Errorf("client: %s: answer larger than %d bytes", op, limit)
	case !ok:
		if se := schemeOfAnswer(op, resp); se != nil {
			return resp, nil, se
		}
		return resp, nil, decodeError(op, resp, b)
	}
	return resp, b, nil
}

// readBody reads up to limit+1 bytes of the answer, in one buffer of the
// announced length when there is one (a fetch answer is up to megabytes:
// growing a buffer for it would copy it several times).
func readBody(resp *http.Response, limit int64) ([]byte, error) {
	if n := resp.ContentLength; n >= 0 && n <= limit {
		b := make([]byte, n)
		_, err := io.ReadFull(resp.Body, b)
		return b, err
	}
	return io.ReadAll(io.LimitReader(resp.Body, limit+1))
}

type request struct {
	method string
	url    string
	bearer string
	accept string
	body   []byte
	// joinKey is a join's key (driver.Send.JoinKey), sent as the
	// Idempotency-Key header; "" sends none.
	joinKey string
	// onHeaders, if set, sees the headers of a 2xx answer before its
	// body is read.
	onHeaders func(http.Header)
}

// postJSON posts in and decodes the answer into out (nil: ignore it).
func (t *transport) postJSON(ctx context.Context, op, url, bearer string, in, out any) error {
	return t.postKeyed(ctx, op, url, bearer, "", in, out)
}

// postKeyed is postJSON with a join's key (request.joinKey).
func (t *transport) postKeyed(ctx context.Context, op, url, bearer, joinKey string, in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("client: %s: encode: %w", op, err)
	}
	_, body, err := t.do(ctx, op, request{method: http.MethodPost, url: url, bearer: bearer, body: b, joinKey: joinKey}, maxCoordinatorBody)
	if err != nil || out == nil {
		return err
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("client: %s: decode answer: %w", op, err)
	}
	return nil
}

// retry runs call until it succeeds, fails for good, or ctx ends;
// transport errors and retriable codes are retried after a backoff.
func (t *transport) retry(ctx context.Context, call func(context.Context) error) error {
	for round := 0; ; round++ {
		err := call(ctx)
		if err == nil || !retriable(err) || ctx.Err() != nil {
			return err
		}
		if t.backoff.wait(ctx, round, retryHint(err)) != nil {
			return err
		}
	}
}

// retriable: a transport error or a retriable refusal.
func retriable(err error) bool {
	var e *Error
	if errors.As(err, &e) {
		return e.Retriable()
	}
	return !errors.Is(err, context.Canceled)
}

func retryHint(err error) time.Duration {
	var e *Error
	if errors.As(err, &e) {
		return e.RetryAfter
	}
	return 0
}

// failover reports whether another gateway should be tried: this one is
// unreachable, not ready, out of sync or failing.
func failover(err error) bool {
	var e *Error
	if errors.As(err, &e) {
		return e.Status >= 500
	}
	return true
}

// Unsent reports whether a request certainly never reached a server
// (refused connection, DNS failure), so even a non-idempotent one may be
// sent again: the CLI's admin client asks it too.
func Unsent(err error) bool { return unsent(err) }

func unsent(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}

// backoff is a bounded, jittered exponential pause.
type backoff struct {
	base, max time.Duration
}

// wait pauses for round's backoff (or hint, the server's Retry-After, if
// longer), in [d/2, d]; it returns ctx's error if ctx ends first.
func (b backoff) wait(ctx context.Context, round int, hint time.Duration) error {
	t := time.NewTimer(driver.Backoff(round, b.base, b.max, hint, rand.Int64N))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// gatewayPool is the ordered list of gateways and the one in use. Every
// fetch starts at the one in use; a failure moves everyone to the next.
type gatewayPool struct {
	urls    []string
	current atomic.Uint32
}

// newGatewayPool copies urls, without trailing slashes.
func newGatewayPool(urls []string) *gatewayPool {
	return &gatewayPool{urls: trimURLs(urls)}
}

// trimURLs copies urls without their trailing slashes.
func trimURLs(urls []string) []string {
	out := make([]string, len(urls))
	for i, u := range urls {
		out[i] = strings.TrimRight(u, "/")
	}
	return out
}

func (g *gatewayPool) pick() (int, string) {
	i := int(g.current.Load()) % len(g.urls)
	return i, g.urls[i]
}

// fail moves the pool off gateway i, unless someone already did.
func (g *gatewayPool) fail(i int) {
	g.current.CompareAndSwap(uint32(i), uint32((i+1)%len(g.urls)))
}
