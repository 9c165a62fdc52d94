package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
)

func TestDecodeError(t *testing.T) {
	resp := &http.Response{StatusCode: http.StatusRequestedRangeNotSatisfiable, Header: http.Header{}}
	body := api.EncodeError(api.CodeOffsetOutOfRange, "offset 3 out of range", map[string]any{"earliest": 10, "latest": 20})
	e := decodeError("fetch orders/0", resp, body)
	if e.Code != api.CodeOffsetOutOfRange || e.Status != 416 || e.Message != "offset 3 out of range" {
		t.Fatalf("decoded %+v", e)
	}
	if e.detailOffset("earliest") != 10 || e.detailOffset("latest") != 20 || e.detailOffset("missing") != -1 {
		t.Fatalf("details %v", e.Details)
	}

	resp = &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{"Retry-After": {"2"}}}
	e = decodeError("fetch orders/0", resp, []byte("<html>proxy</html>"))
	if e.Code != api.CodeUnavailable || !e.Retriable() || e.RetryAfter != 2*time.Second {
		t.Fatalf("foreign 503 decoded as %+v", e)
	}
}

func TestErrorClassification(t *testing.T) {
	cases := []struct {
		code                       api.Code
		retriable, refresh, rejoin bool
	}{
		{api.CodeUnknownMember, false, false, true},
		{api.CodeCapabilityRevoked, false, true, false},
		{api.CodeTokenExpired, false, true, false},
		{api.CodeStaleEpoch, false, true, false},
		{api.CodeNotReady, true, false, false},
		{api.CodeRateLimited, true, false, false},
		{api.CodeForbidden, false, false, false},
	}
	for _, tc := range cases {
		e := &Error{Code: tc.code, Status: tc.code.Status()}
		if e.Retriable() != tc.retriable || e.NeedsRefresh() != tc.refresh || e.NeedsRejoin() != tc.rejoin {
			t.Errorf("%s: retriable %v refresh %v rejoin %v", tc.code, e.Retriable(), e.NeedsRefresh(), e.NeedsRejoin())
		}
	}
	wrapped := fmt.Errorf("outer: %w", &Error{Code: api.CodeNotReady})
	if codeOf(wrapped) != api.CodeNotReady || codeOf(errors.New("dial tcp: refused")) != api.CodeUnavailable || codeOf(nil) != "" {
		t.Fatalf("codeOf misclassifies")
	}
}

func TestBackoffBounded(t *testing.T) {
	b := backoff{base: time.Millisecond, max: 4 * time.Millisecond}
	for round := range 40 {
		start := time.Now()
		if err := b.wait(t.Context(), round, 0); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("round %d waited %s", round, d)
		}
	}
}

// TestJoinTwiceSaysWhy: a second Join of a joined consumer, and a Join
// after Close, fail with sentinels a caller can test (errors.Is); before,
// both were one plain "already joined or closed".
func TestJoinTwiceSaysWhy(t *testing.T) {
	var e *env
	e = newEnv(t, func(int) []api.Grant { return []api.Grant{e.grantOf(p0, 1, 0, "cap-p0")} })
	c := e.start(e.config())
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := c.Join(ctx); !errors.Is(err, ErrAlreadyJoined) {
		t.Fatalf("second join: %v, want ErrAlreadyJoined", err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Join(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("join after close: %v, want ErrClosed", err)
	}
}
