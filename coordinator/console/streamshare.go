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
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/coordinator/timeline"
	"github.com/capgate/capgate/internal/hangup"
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
// 15 s later, holding its slots meanwhile). The watch (internal/hangup,
// the gateway's long polls' too) peeks at the socket, which nobody else
// reads while a response streams; stop ends it when the stream does, and
// the response closes the connection (SetConnectionClose).
func hangUp(ctx *fasthttp.RequestCtx) (gone <-chan struct{}, stop func()) {
	ch := make(chan struct{})
	ctx.SetConnectionClose()
	return ch, hangup.Watch(ctx.Conn(), func() { close(ch) })
}
