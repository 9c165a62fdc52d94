package console

// Behavior: who gets a live stream (GET /console/events) and when its slot
// comes back.
//   - A session holds at most max_subscribers_per_session streams (every
//     group page and timeline tab holds one); one more is 429
//     rate_limited with Retry-After, naming the setting: one operator's
//     tabs never take the slots of the others.
//   - All sessions together hold at most max_subscribers; one more is 503
//     unavailable with Retry-After.
//   - A stream gives its slots back when it ends: after streamFor, at
//     its session's end, at shutdown, or as soon as its client hangs up
//     (hangUp: the connection's read side ends). The page's script
//     retries a refused stream with backoff and says so
//     (assets/static/console.js).

import (
	"net"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/coordinator/timeline"
)

// streamRetryAfter is the Retry-After of a refused stream, in seconds:
// a slot comes back when another stream ends, which is not foreseeable.
const streamRetryAfter = 5

// subscribe takes a slot of s's share and one of the feed's, and starts
// reading after id after. On refusal it has answered; else release gives
// both slots back (once, when the stream ends).
func (c *Console) subscribe(ctx *fasthttp.RequestCtx, s *session, after uint64) (sub *timeline.Subscription, release func(), ok bool) {
	share := min(c.cfg.MaxSubscribersPerSession, c.cfg.MaxSubscribers)
	if int(s.streams.Add(1)) > share {
		s.streams.Add(-1)
		ctx.Response.Header.Set("Retry-After", strconv.Itoa(streamRetryAfter))
		writeProblemDetails(ctx, fasthttp.StatusTooManyRequests, "rate_limited",
			"this session has "+strconv.Itoa(share)+" live streams open, its share: close a tab showing a group or the timeline, or retry",
			map[string]any{"limit": "coordinator.console.max_subscribers_per_session", "max": share})
		return nil, nil, false
	}
	sub, err := c.feed.Subscribe(after)
	if err != nil { // timeline.ErrTooManySubscribers, the only error
		s.streams.Add(-1)
		ctx.Response.Header.Set("Retry-After", strconv.Itoa(streamRetryAfter))
		writeProblemDetails(ctx, fasthttp.StatusServiceUnavailable, "unavailable", "too many live timeline streams",
			map[string]any{"limit": "coordinator.console.max_subscribers", "max": c.cfg.MaxSubscribers})
		return nil, nil, false
	}
	return sub, func() { sub.Close(); s.streams.Add(-1) }, true
}

// hangUp is closed when the client of ctx's connection hangs up: the
// stream then ends at once, not at the next ping whose write fails (5 to
// 15 s later, holding its slots meanwhile). It reads the connection, which
// nobody else does while a response streams (an EventSource sends nothing
// more; bytes a client sends anyway are dropped, and the response closes
// the connection: setConnectionClose), until a read fails — the client
// closed it, or the server did when the response ended.
func hangUp(ctx *fasthttp.RequestCtx) <-chan struct{} {
	gone := make(chan struct{})
	conn := ctx.Conn()
	if conn == nil {
		return gone
	}
	ctx.SetConnectionClose()
	go watchRead(conn, gone)
	return gone
}

func watchRead(conn net.Conn, gone chan<- struct{}) {
	defer func() {
		// A RequestCtx made by Init (tests that call Serve directly) has
		// a connection that panics on Read: no client to watch.
		if recover() != nil {
			return
		}
		close(gone)
	}()
	// The request's read deadline (read_timeout) no longer applies: the
	// stream carries its own.
	_ = conn.SetReadDeadline(time.Time{})
	var b [256]byte
	for {
		if _, err := conn.Read(b[:]); err != nil {
			return
		}
	}
}
