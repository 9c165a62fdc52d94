package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// unansweredLogEvery is how often at most a gateway that does not answer
// fetches (refused connections, timeouts) is logged: every partition
// retries it, so one line per attempt would flood the log.
const unansweredLogEvery = 10 * time.Second

// unanswered remembers fetches no gateway answered. A fetch whose
// gateway cannot be reached is retried (failing over to the next
// gateway, then backing off) for as long as the consumer runs, so Poll
// waits through it; this is what tells a caller who gives up waiting
// that it waited on an unreachable gateway, not on an idle partition.
type unanswered struct {
	mu       sync.Mutex
	last     error                // the last unanswered fetch since the last answered one
	answered bool                 // a gateway has answered a fetch, if only to refuse it
	byGate   map[int]*logThrottle // gateway index → the log of its failures
	hinted   map[int]bool         // gateways whose failure WithFetchHint's hint went with, since they last answered
}

// logThrottle bounds a repeated failure's log: the first is logged, then
// at most one per unansweredLogEvery, with the count of those not
// logged. Callers lock.
type logThrottle struct {
	logged time.Time // when a failure was last logged (zero: never)
	missed int       // failures not logged since
}

// due says whether a failure at now is logged, with how many went
// unlogged before it.
func (t *logThrottle) due(now time.Time) (log bool, missed int) {
	if !t.logged.IsZero() && now.Sub(t.logged) < unansweredLogEvery {
		t.missed++
		return false, 0
	}
	missed, t.missed, t.logged = t.missed, 0, now
	return true, missed
}

// note records the outcome of one fetch from gateway i (err nil: it
// answered) and says whether to log it now, with how many failures of
// that gateway went unlogged before it.
func (u *unanswered) note(i int, err error, now time.Time) (log bool, missed int) {
	var refused *Error
	u.mu.Lock()
	defer u.mu.Unlock()
	switch {
	case err == nil || errors.As(err, &refused):
		u.last, u.answered = nil, true // a gateway answered, if only to refuse
		// Its next outage is hinted again: the first one's hint, maybe
		// hours back, has scrolled away (newuser7).
		delete(u.hinted, i)
		return false, 0
	case errors.Is(err, context.Canceled), configError(err):
		// A configuration error stops the consumer with its own
		// message: it is no gateway that did not answer.
		return false, 0
	}
	u.last = err
	if u.byGate == nil {
		u.byGate = map[int]*logThrottle{}
	}
	t := u.byGate[i]
	if t == nil {
		t = &logThrottle{}
		u.byGate[i] = t
	}
	return t.due(now)
}

// hintDue says whether gateway i's failure, about to be logged, is the
// first to carry the fetch hint: once per outage of a gateway — the first
// logged failure, and the first logged after it answered again (at most
// one per unansweredLogEvery, as the warnings it goes with).
func (u *unanswered) hintDue(i int) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.hinted[i] {
		return false
	}
	if u.hinted == nil {
		u.hinted = map[int]bool{}
	}
	u.hinted[i] = true
	return true
}

// Unanswered is the error of the last fetch that no gateway answered (a
// refused connection, a timeout, an unreachable address) when no fetch
// has been answered since, and nil otherwise. The consumer keeps
// retrying such fetches (failing over between gateways), so Poll just
// waits; a caller that stops waiting — an idle timeout — asks this to
// tell "nothing to read" from "no gateway reachable". Safe for
// concurrent use.
func (c *Consumer) Unanswered() error {
	c.unanswered.mu.Lock()
	defer c.unanswered.mu.Unlock()
	return c.unanswered.last
}

// FetchAnswered reports whether a gateway has answered a fetch of this
// consumer yet, if only to refuse it. With Unanswered it tells a caller
// who stops waiting early — an idle timeout shorter than request_timeout
// — "nothing to read" from "the first fetches are still unanswered" (a
// gateway URL naming a port that takes the request and never answers
// read as idle: newuser6). Safe for concurrent use.
func (c *Consumer) FetchAnswered() bool {
	c.unanswered.mu.Lock()
	defer c.unanswered.mu.Unlock()
	return c.unanswered.answered
}

// noteFetch records a fetch's outcome and logs, at most once per
// unansweredLogEvery and gateway, a fetch the gateway did not answer
// (refusals are logFetch's).
func (c *Consumer) noteFetch(gateway int, err error) {
	log, missed := c.unanswered.note(gateway, err, time.Now())
	if !log {
		return
	}
	url := c.fetcher.url(gateway)
	fields := []zap.Field{zap.String("gateway", url), zap.Int("failures_not_logged", missed), zap.Error(err)}
	hint := c.opts.fetchHint
	if hint == nil {
		hint = defaultFetchHint
	}
	if c.unanswered.hintDue(gateway) {
		// Once: a new user pointing --gateways at a Kafka port read
		// the bare transport error every 10 s for as long as it ran
		// (newuser6's left).
		if hint := hint(c.ctx, url, err); hint != "" {
			fields = append(fields, zap.String("hint", hint))
		}
	}
	c.log.Warn("fetch failed: the gateway did not answer; retrying", fields...)
}

// defaultFetchHint is the hint of a consumer without WithFetchHint: what
// the transport errors of a wrong Config.Gateways URL usually mean. A Go
// program pointing it at a Kafka port (a broker's, a gateway's Kafka
// listener) read "connection reset by peer" every 10 s and nothing more
// (newuser9); the CLI's hint says the same with its flags.
func defaultFetchHint(_ context.Context, gatewayURL string, err error) string {
	u, perr := url.Parse(gatewayURL)
	if perr != nil {
		return ""
	}
	var dns *net.DNSError
	var timeout interface{ Timeout() bool }
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Sprintf("nothing listens at %s: is the gateway running, and is Config.Gateways its HTTP address (gateway.listen)?", u.Host)
	case errors.As(err, &dns):
		return fmt.Sprintf("host %q not found: check Config.Gateways", u.Hostname())
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET):
		if u.Scheme == "http" {
			return fmt.Sprintf("%s closed the connection without an HTTP answer: is it a Kafka port (a broker, a gateway's Kafka listener) or a TLS server (then https://) rather than a gateway's HTTP address? Check Config.Gateways", u.Host)
		}
		return fmt.Sprintf("%s closed the connection without an HTTP answer: is it a gateway's HTTP address? Check Config.Gateways", u.Host)
	case errors.As(err, &timeout) && timeout.Timeout():
		return fmt.Sprintf("no answer from %s, where a gateway answers within fetch_max_wait: is it a gateway's HTTP address, not a Kafka port? Check Config.Gateways", u.Host)
	}
	return ""
}
