package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/capgate/capgate/api"
)

// Error is a request the coordinator or a gateway refused. Decide from
// Code (through Retriable, NeedsRefresh, NeedsRejoin), never from Message.
type Error struct {
	// Op is what was attempted: "join", "heartbeat", "commit", "leave",
	// "fetch orders/3", "produce orders/3".
	Op      string
	Code    api.Code
	Status  int
	Message string
	// Details are the error body's other fields (offset_out_of_range
	// carries earliest and latest).
	Details map[string]any
	// RetryAfter is the server's Retry-After, zero when absent.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	return fmt.Sprintf("client: %s: %s (%d): %s", e.Op, e.Code, e.Status, e.Message)
}

// Retriable reports whether the same request may succeed later as is.
func (e *Error) Retriable() bool { return api.IsRetriable(e.Code) }

// NeedsRefresh reports whether a fresh capability is needed first.
func (e *Error) NeedsRefresh() bool { return api.NeedsRefresh(e.Code) }

// NeedsRejoin reports whether the member is gone.
func (e *Error) NeedsRejoin() bool { return api.NeedsRejoin(e.Code) }

// ErrClosed is returned by calls on a consumer that stopped.
var ErrClosed = errors.New("client: consumer closed")

// ErrNotJoined is returned by Poll and Commit before Join succeeded.
var ErrNotJoined = errors.New("client: consumer not joined")

// ErrAlreadyJoined is returned by Join of a consumer that joined: a
// consumer is one member; build another for another. (A Join that failed
// may be called again.)
var ErrAlreadyJoined = errors.New("client: consumer already joined")

// decodeError builds the Error of a refused response from its body; a
// body that is not ours (a proxy's page) gets the code of its status.
func decodeError(op string, resp *http.Response, body []byte) *Error {
	e := &Error{Op: op, Status: resp.StatusCode, RetryAfter: retryAfter(resp.Header.Get("Retry-After"))}
	var wire api.ErrorBody
	if json.Unmarshal(body, &wire) == nil && wire.Error.Code != "" {
		e.Code, e.Message, e.Details = wire.Error.Code, wire.Error.Message, wire.Error.Details
		return e
	}
	e.Code = codeOfStatus(resp.StatusCode)
	e.Message = http.StatusText(resp.StatusCode)
	return e
}

func codeOfStatus(status int) api.Code {
	switch status {
	case http.StatusBadRequest:
		return api.CodeBadRequest
	case http.StatusUnauthorized:
		return api.CodeUnauthorized
	case http.StatusForbidden:
		return api.CodeForbidden
	case http.StatusNotFound:
		return api.CodeNotFound
	case http.StatusConflict:
		return api.CodeConflict
	case http.StatusRequestedRangeNotSatisfiable:
		return api.CodeOffsetOutOfRange
	case http.StatusTooManyRequests:
		return api.CodeRateLimited
	case http.StatusBadGateway:
		return api.CodeBrokerError
	case http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return api.CodeUnavailable
	case http.StatusMisdirectedRequest:
		return api.CodeNotLeader
	}
	return api.CodeInternal
}

// retryAfter reads a Retry-After in seconds (the HTTP-date form is not
// used by capgate).
func retryAfter(v string) time.Duration {
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0
	}
	return time.Duration(n) * time.Second
}

// codeOf is the code the session is told for err: the refusal's code, or
// unavailable for a transport error (retriable, never success).
func codeOf(err error) api.Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return api.CodeUnavailable
}

// detailOffset reads an integer detail (JSON numbers decode as float64).
func (e *Error) detailOffset(key string) int64 {
	if v, ok := e.Details[key].(float64); ok && v >= 0 {
		return int64(v)
	}
	return -1
}
