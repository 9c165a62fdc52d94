package console

// Behavior: GET /console/events?group=G&after=N — a session (else 401).
// Server-sent events: every timeline event after id N (or after the
// Last-Event-ID header a reconnecting browser sends), of group G only when
// given (its events and the QoS overrides naming no group: Event.Of), as `id: <id>` + `data: <Event JSON>`. N and Last-Event-ID have the
// API's one spelling of a number (api.ParseDecimal: decimal digits, no
// sign, space or leading zero, at most 2^63-1); `after` is required and
// given once; anything else is 400 bad_request with a JSON error body, as
// a bad query number of the admin API (a missing `after` too: a page
// starts its stream at the newest event it rendered, so no event falls
// between the page and its stream; "from now" would hide that gap, and
// after=0 reads every event kept). A subscriber that fell more
// than timeline_events behind gets `event: lagged` and resumes at the
// oldest event kept (the page then re-reads its grid). At most
// max_subscribers_per_session streams of one session (429 beyond) and
// max_subscribers of all (503 beyond): streamshare.go. A stream ends after
// streamFor (the browser reconnects at once with Last-Event-ID, so none
// is lost while the ring holds it), when its session expires or ends
// (logout, a newer login from the browser, dropped from a full table, its
// IdP identity denied — seen within pingEvery), when its client hangs up
// (hangUp), or when the coordinator shuts down; a comment line every
// pingEvery finds connections that died without a word.

import (
	"bufio"
	"encoding/json"
	"math"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/timeline"
)

const (
	streamFor   = time.Minute
	pingEvery   = 5 * time.Second
	readBatch   = 256 // events written per wake-up before flushing
	reconnectMs = 250 // the browser's reconnect delay after a stream ends
)

func (c *Console) serveEvents(ctx *fasthttp.RequestCtx, s *session, _ []string) {
	args := ctx.QueryArgs()
	groupName := string(args.Peek("group"))
	after, problem := streamStart(args.PeekMulti("after"), ctx.Request.Header.Peek("Last-Event-ID"))
	if problem != "" {
		writeProblem(ctx, fasthttp.StatusBadRequest, "bad_request", problem)
		return
	}
	sub, release, ok := c.subscribe(ctx, s, after)
	if !ok {
		return
	}
	life := min(streamFor, s.expires.Sub(c.now()))
	// The stream outlives the server's write_timeout by design: it carries
	// its own deadline.
	_ = ctx.SetWriteDeadline(time.Now().Add(life + pingEvery))
	ctx.SetContentType("text/event-stream")
	ctx.Response.Header.Set("X-Accel-Buffering", "no")
	gone, stopWatch := hangUp(ctx)
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		defer release()
		defer stopWatch()
		c.stream(w, sub, s, groupName, life, gone)
	})
}

// eventIDRule is how a refused event id is told the spelling wanted.
const eventIDRule = "an event id: " + api.DecimalRule + " in [0, 9223372036854775807]"

// streamStart is the event id a stream starts after: the Last-Event-ID
// header when not empty, else the after query argument (required, once,
// checked also when the header overrides it);
// a problem message names what is refused. A bad Last-Event-ID is
// refused too rather than ignored: EventSource sends back exactly an
// `id:` this stream wrote (strconv.FormatUint: the one spelling), so
// only a hand-made request carries another, and ignoring it would
// resume that client somewhere it did not ask for.
func streamStart(after [][]byte, lastEventID []byte) (uint64, string) {
	if len(after) != 1 {
		return 0, "after must be given once, as " + eventIDRule
	}
	id, ok := api.ParseDecimal(after[0], math.MaxInt64)
	if !ok {
		return 0, "after must be " + eventIDRule
	}
	if len(lastEventID) > 0 { // empty: no id yet, as a browser that has none omits it
		if id, ok = api.ParseDecimal(lastEventID, math.MaxInt64); !ok {
			return 0, "Last-Event-ID must be " + eventIDRule
		}
	}
	return uint64(id), ""
}

// stream writes events for life, until the coordinator closes, the
// session ends (logout, a newer login, pruned; its identity denied, seen
// at the next ping), or the client is gone (it hung up, or a write fails).
func (c *Console) stream(w *bufio.Writer, sub *timeline.Subscription, s *session, groupName string, life time.Duration, gone <-chan struct{}) {
	ping := time.NewTicker(pingEvery)
	defer ping.Stop()
	stop := time.NewTimer(life)
	defer stop.Stop()
	w.WriteString("retry: " + strconv.Itoa(reconnectMs) + "\n\n")
	if w.Flush() != nil {
		return
	}
	var batch []timeline.Event
	for {
		select {
		case <-c.closing:
			return
		case <-s.ended:
			return
		case <-gone:
			return
		case <-stop.C:
			return
		case <-ping.C:
			if s.isDenied() {
				return
			}
			w.WriteString(": ping\n\n")
		case <-sub.Ready():
			var lagged bool
			batch, lagged = sub.Read(batch[:0], readBatch)
			if lagged {
				w.WriteString("event: lagged\ndata: {}\n\n")
			}
			for i := range batch {
				writeEvent(w, &batch[i], groupName)
			}
		}
		if w.Flush() != nil {
			return
		}
	}
}

// writeEvent writes e if it belongs to groupName ("" = every group).
// Events of other groups still advance the id, so a reconnect resumes
// after them.
func writeEvent(w *bufio.Writer, e *timeline.Event, groupName string) {
	if groupName != "" && !e.Of(groupName) {
		return
	}
	b, err := json.Marshal(e)
	if err != nil {
		return
	}
	w.WriteString("id: " + strconv.FormatUint(e.ID, 10) + "\ndata: ")
	w.Write(b)
	w.WriteString("\n\n")
}
