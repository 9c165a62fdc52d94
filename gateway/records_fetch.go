package gateway

// Behavior: GET /v1/topics/{topic}/partitions/{p}/records?offset=&max_bytes=&max_wait_ms=
// with "Authorization: Bearer <capability>" holding the fetch op for
// exactly this topic and partition.
//
//   - offset is required: decimal ≥ 0, or earliest / latest, resolved
//     against the partition's log after the capability was checked and
//     once the fetch is counted in flight (its caps bound the resolutions
//     a stalled broker holds; a revocation cancels one) (the SDK
//     sends them for grants whose start the coordinator could not look
//     up). max_bytes (> 0) defaults to
//     default_fetch_bytes and is clamped to max_fetch_bytes (and to what the
//     capability's byte rate still allows); as in Kafka the first batch
//     comes whole even when larger. max_wait_ms (≥ 0, default 0) is the long
//     poll, clamped to max_wait: the broker answers as soon as a record
//     exists at offset. Unknown or repeated parameters, signs, spaces and
//     partitions outside [0, 2^31) are 400.
//   - JSON (default): 200 {"records":[{"offset","timestamp","key","value",
//     "headers"}],"next_offset","high_watermark"}, key/value/header values
//     base64 (null when absent), headers omitted when none, no record below
//     offset. Capgate-Next-Offset and Capgate-High-Watermark headers too.
//   - Accept: application/vnd.kafka.record-batch: 200 with the broker's
//     record batches untouched (nothing decoded) and the same headers. The
//     first batch may start below offset, as Kafka serves whole batches.
//     A capability with an offset range other than [0, ∞) is refused the
//     raw format (403): whole batches could carry records outside its range
//     and the gateway does not re-encode batches. Use JSON.
//   - Offset range caveat [from, to): an offset outside it is 403; records
//     at or beyond to are cut and next_offset is then to.
//   - After the broker answers, and before any record is written, the
//     capability is decided again against the current view and sync state:
//     a fence, deny or member revocation that arrived meanwhile (which also
//     cancels the broker wait) answers 409 capability_revoked, never data.
//   - Refusals: 400 bad input; 401 no/invalid token (WWW-Authenticate) or
//     token_expired; 403 not covered (details.capability: what the
//     capability covers); 404 unknown topic or partition; 409
//     capability_revoked; 416 offset_out_of_range with earliest and latest;
//     429 rate_limited with Retry-After; 502 broker_error; 503 not_ready,
//     out_of_sync or unavailable with Retry-After. All JSON error bodies.

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/broker"
	"github.com/capgate/capgate/gateway/authz"
	"github.com/capgate/capgate/internal/answerheld"
	"github.com/capgate/capgate/internal/hangup"
	"github.com/capgate/capgate/ocap"
)

type fetchCall struct {
	call
	raw   bool
	query fetchQuery
	next  int64

	entry *fetchEntry // while in flight
}

func (g *Gateway) fetchRecords(ctx *fasthttp.RequestCtx, topic, partition []byte) {
	f := fetchCall{call: call{g: g, ctx: ctx, op: opFetchJSON, start: ctx.Time()}}
	if f.raw = acceptsRecordBatch(&ctx.Request.Header); f.raw {
		f.op = opFetchRaw
	}
	code := f.admit(topic, partition)
	if code == "" {
		code = f.serve()
	}
	if f.qos.LogLevel != "debug" {
		f.finish(code)
		return
	}
	f.finish(code, zap.Int64("offset", f.query.offset), zap.Int64("next_offset", f.next), zap.Int32("max_bytes", f.query.maxBytes),
		zap.Duration("max_wait", f.query.maxWait), zap.Bool("raw", f.raw))
}

// admit parses and authorizes the fetch; "" means go ahead.
func (f *fetchCall) admit(topic, partition []byte) api.Code {
	ctx := f.ctx
	if code := refuseNoBearer(ctx, "capability", ""); code != "" {
		return code
	}
	p, problem := recordsTarget(topic, partition)
	if problem != "" {
		writeError(ctx, api.CodeBadRequest, problem, nil)
		return api.CodeBadRequest
	}
	q, problem := f.g.parseFetchQuery(ctx.QueryArgs())
	if problem != "" {
		writeError(ctx, api.CodeBadRequest, problem, nil)
		return api.CodeBadRequest
	}
	f.query = q
	allowance, code := f.admitCapability(topic, authz.Request{Partition: p, Op: ocap.OpFetch, Offset: q.offset})
	if code != "" {
		return code
	}
	if f.raw && rangeLimited(f.claims) {
		writeError(ctx, api.CodeForbidden, "raw record batches are not served to offset-range-limited capabilities; ask for JSON", nil)
		return api.CodeForbidden
	}
	if allowance >= 0 {
		f.query.maxBytes = int32(min(int64(f.query.maxBytes), max(allowance, 1)))
	}
	return ""
}

// resolveOffset turns offset=earliest|latest into the partition's log
// start or end, then applies the offset caveat to it. It runs in flight
// (serve, under fctx): after the capability was checked, so no
// unauthenticated request reaches the broker, and inside the in-flight
// caps, so a stalled broker holds at most max_inflight_fetches_per_holder
// (per tenant, per gateway) resolutions of one holder, and a revocation
// cancels and waits for it as for the fetch — before, the two ListOffsets
// ran before the fetch was counted, up to request_timeout each, as many
// at once as a holder sent (redteam20).
func (f *fetchCall) resolveOffset(fctx *fetchCtx) api.Code {
	earliest, latest, err := f.g.broker.Offsets(fctx, f.req.Topic, f.req.Partition)
	if err != nil {
		now := time.Now()
		if code := f.g.decide(f.ctx, f.claims, f.req, now); code != "" {
			return code
		}
		if code := f.g.refuseUnsynced(f.ctx, now); code != "" {
			return code
		}
		return f.g.fetchError(f.ctx, fctx.Cause(), err)
	}
	if f.query.offset == offsetEarliest {
		f.query.offset = earliest
	} else {
		f.query.offset = latest
	}
	f.req.Offset = f.query.offset
	if !f.claims.AllowsOffset(f.query.offset) {
		writeError(f.ctx, api.CodeForbidden, "the resolved offset is outside the capability's offset range", map[string]any{"offset": f.query.offset})
		return api.CodeForbidden
	}
	return ""
}

// serve runs the broker fetch as an in-flight fetch a revocation can
// cancel, decides again, and writes the answer. The entry is finished only
// after the body is encoded, so the sync client's wait covers it. A fetch
// over the gateway's, its tenant's or its holder's in-flight cap is
// refused; a long poll whose client hangs up (or half-closes) is
// cancelled at once and answered as if max_wait had passed (hungUp).
func (f *fetchCall) serve() api.Code {
	g := f.g
	entry, fctx, refused := g.inflight.start(f.claims, f.req)
	if refused != hitNone {
		return f.refuseInflight(refused)
	}
	defer g.inflight.finish(entry)
	f.entry = entry
	if f.query.offset < 0 {
		if code := f.resolveOffset(fctx); code != "" {
			return code
		}
	}
	var watch *pollWatch
	var waiting func()
	if f.query.maxWait > 0 {
		watch = &pollWatch{conn: f.ctx.Conn(), entry: entry}
		waiting = watch.start
	}
	res, err := g.broker.Fetch(fctx, broker.FetchRequest{
		Topic: f.req.Topic, Partition: f.req.Partition, Offset: f.query.offset,
		MaxBytes: f.query.maxBytes, MaxWait: f.query.maxWait, Raw: f.raw, Waiting: waiting,
	})
	defer res.Release() // JSON copies; a large raw answer takes the buffer along (writeRaw)
	if watch != nil && watch.stop != nil {
		watch.stop()
		f.waited = true
	}
	if g.afterFetch != nil {
		g.afterFetch()
	}
	now := time.Now()
	if code := g.decide(f.ctx, f.claims, f.req, now); code != "" {
		return code
	}
	if code := g.refuseUnsynced(f.ctx, now); code != "" {
		return code
	}
	if err != nil && errors.Is(fctx.Cause(), errClientGone) {
		res = f.hungUp()
	} else if err != nil {
		return g.fetchError(f.ctx, fctx.Cause(), err)
	}
	if code := f.spend(&res, now); code != "" {
		return code
	}
	if f.raw {
		return f.writeRaw(&res)
	}
	return f.writeJSON(res)
}

// hungUp is the answer to a long poll ended early because its client
// closed its side (EOF) or reset: what max_wait running out with nothing
// new would answer — no records, next_offset the offset asked for, and
// the high watermark the offset too (the fetch long-polled only because
// its first round trip found nothing at or after the offset, and an
// offset past the high watermark is out of range) — on a connection
// closed after it. A half-close (shutdown(SHUT_WR)) cannot be told from
// a full close, and a half-closed client still reads: before, it got 503
// "client went away during the long poll" although it was there.
func (f *fetchCall) hungUp() broker.FetchResult {
	f.g.metrics.abandoned.Inc()
	f.ctx.SetConnectionClose()
	return broker.FetchResult{NextOffset: f.query.offset, HighWatermark: f.query.offset}
}

// pollWatch watches a long poll's client for a hang-up while the fetch
// waits at the broker. Apart from fetchCall, and made only for a long
// poll, so that the fetchCall of every other fetch stays on the stack
// (a method value of it would move it to the heap).
type pollWatch struct {
	conn  net.Conn
	entry *fetchEntry
	stop  func() // set once the watch began
}

// start begins the watch (broker.FetchRequest.Waiting).
func (w *pollWatch) start() {
	entry := w.entry
	w.stop = hangup.Watch(w.conn, func() { entry.cancel(errClientGone) })
}

// A cap's refusals: 503 overloaded at the gateway's cap (try another
// gateway), 429 too_many_fetches at the holder's, each naming its setting.
type capRefusal struct {
	all, holder       string // messages
	allKey, holderKey string // the settings, as details
}

var (
	inflightRefusal = capRefusal{
		all:    "this gateway serves as many fetches and produces as it may; retry on another gateway",
		holder: "this capability's holder has as many fetches and produces in flight as it may; wait for one to finish",
		allKey: "max_inflight_fetches", holderKey: "max_inflight_fetches_per_holder",
	}
	heldRefusal = capRefusal{
		all:    "this gateway holds as many answer bytes for its clients as it may; retry on another gateway",
		holder: "this capability's holder has as many answer bytes on their way to it as it may; read them first",
		allKey: "max_answer_bytes_held", holderKey: "max_answer_bytes_held_per_holder",
	}
)

// refuse answers a request over a cap (code from inflight.start or
// heldBytes.take), with Retry-After.
func (r capRefusal) refuse(c *call, code api.Code, all, perHolder int64) api.Code {
	setRetryAfter(c.ctx, time.Second)
	if code == api.CodeOverloaded {
		writeError(c.ctx, code, r.all, map[string]any{r.allKey: all})
		return code
	}
	writeError(c.ctx, code, r.holder, map[string]any{r.holderKey: perHolder})
	return code
}

// refuseHeld answers a fetch whose answer would take the bytes the
// gateway holds for its clients, or its holder's, over their cap.
func (f *fetchCall) refuseHeld(code api.Code) api.Code {
	return heldRefusal.refuse(&f.call, code, f.g.cfg.MaxAnswerBytesHeld, f.g.cfg.MaxAnswerBytesHeldPerHolder)
}

// refuseInflight answers a fetch or produce over an in-flight cap: the
// gateway's or the holder's (inflightRefusal), or the tenant's — 429
// too_many_fetches naming max_inflight_fetches_per_tenant.
func (c *call) refuseInflight(hit capHit) api.Code {
	if hit == hitTenant {
		setRetryAfter(c.ctx, time.Second)
		writeError(c.ctx, api.CodeTooManyFetches, "the tenant this capability was granted to has as many fetches and produces in flight as it may, across all its capabilities; wait for one to finish",
			map[string]any{"max_inflight_fetches_per_tenant": c.g.cfg.inflightPerTenant()})
		return api.CodeTooManyFetches
	}
	return inflightRefusal.refuse(c, hit.code(), int64(c.g.cfg.MaxInflightFetches), int64(c.g.cfg.MaxInflightFetchesPerHolder))
}

func (f *fetchCall) writeJSON(res broker.FetchResult) api.Code {
	recs, next := cutAtRangeEnd(f.claims, res.Records, res.NextOffset)
	resp := &f.ctx.Response
	body := appendFetchJSON(resp.SwapBody(nil)[:0], recs, next, res.HighWatermark)
	if len(body) < heldMin {
		resp.SwapBody(body)
	} else {
		// Handed to fasthttp as a stream, like a large raw answer, so
		// that its bytes count as held until written.
		holder := f.entry.holder
		if code := f.g.held.take(holder, int64(len(body))); code != "" {
			return f.refuseHeld(code)
		}
		b := heldBodies.Get().(*heldBody)
		b.Reset(body)
		b.held, b.holder, b.n = f.g.held, holder, int64(len(body))
		resp.SetBodyStream(b, len(body))
	}
	resp.SetStatusCode(fasthttp.StatusOK)
	resp.Header.SetContentType(api.MediaJSON)
	setOffsetHeaders(resp, next, res.HighWatermark)
	f.bytes, f.records, f.next = len(body), len(recs), next
	f.g.metrics.bytesOut.Add(float64(len(body)))
	f.g.metrics.recordsOut.Add(float64(len(recs)))
	return ""
}

// writeRaw answers the broker's record batches. A large answer is not
// copied: res's buffer goes to fasthttp as the body and back to the
// broker's pool once the answer is written (res is left empty).
func (f *fetchCall) writeRaw(res *broker.FetchResult) api.Code {
	resp := &f.ctx.Response
	n, next, highWatermark := len(res.Batches), res.NextOffset, res.HighWatermark
	if n < rawStreamMin {
		// Copied into fasthttp's pooled body buffer, so that the broker's
		// answer buffer is reused (res.Release) rather than left as garbage.
		resp.SetBody(res.Batches)
	} else {
		holder := f.entry.holder
		if code := f.g.held.take(holder, int64(n)); code != "" {
			return f.refuseHeld(code)
		}
		b := rawBodies.Get().(*rawBody)
		b.res = *res
		b.Reset(res.Batches)
		b.held, b.holder, b.n = f.g.held, holder, int64(n)
		*res = broker.FetchResult{}
		resp.SetBodyStream(b, n)
	}
	resp.SetStatusCode(fasthttp.StatusOK)
	resp.Header.SetContentType(api.MediaRecordBatch)
	setOffsetHeaders(resp, next, highWatermark)
	f.bytes, f.next = n, next
	f.g.metrics.bytesOut.Add(float64(n))
	return ""
}

// rawStreamMin is the smallest raw answer handed to fasthttp uncopied:
// below it the copy costs less than the stream's indirections (and the
// broker does not recycle answers that small anyway).
const rawStreamMin = answerheld.Min

// rawBody is a raw answer's record batches as a response body stream.
// fasthttp writes it with WriteTo (bytes.Reader's: one Write of the whole
// slice, the headers and the first bytes together, the rest straight from
// the broker's buffer) and closes it once the answer is written, or when
// the response is reset unwritten; Close recycles the broker's buffer.
type rawBody struct {
	heldBody
	res broker.FetchResult
}

var rawBodies = sync.Pool{New: func() any { return new(rawBody) }}

func (b *rawBody) Close() error {
	b.give()
	b.res.Release()
	b.res = broker.FetchResult{}
	rawBodies.Put(b)
	return nil
}

// heldBody is a large answer as a response body stream, its bytes
// counted as held (heldBytes) until fasthttp has written it, or reset
// the response unwritten, and closes it.
type heldBody struct {
	bytes.Reader
	held   *heldBytes
	holder string
	n      int64
}

var heldBodies = sync.Pool{New: func() any { return new(heldBody) }}

// SupportsBodyWriteTo tells fasthttp to use WriteTo (fasthttp.BodyWriterTo).
func (b *heldBody) SupportsBodyWriteTo() bool { return true }

// give returns the body's bytes to the count, once.
func (b *heldBody) give() {
	if b.held != nil {
		b.held.give(b.holder, b.n)
	}
	b.held, b.holder, b.n = nil, "", 0
	b.Reset(nil)
}

func (b *heldBody) Close() error {
	b.give()
	heldBodies.Put(b)
	return nil
}

// The offset headers' names, already canonical, as SetCanonical wants.
var (
	headerNextOffset    = []byte(api.HeaderNextOffset)
	headerHighWatermark = []byte(api.HeaderHighWatermark)
)

func setOffsetHeaders(resp *fasthttp.Response, next, highWatermark int64) {
	var scratch [20]byte
	resp.Header.SetCanonical(headerNextOffset, strconv.AppendInt(scratch[:0], next, 10))
	resp.Header.SetCanonical(headerHighWatermark, strconv.AppendInt(scratch[:0], highWatermark, 10))
}

// cutAtRangeEnd drops the records at or beyond the capability's range end;
// next_offset is then the range end.
func cutAtRangeEnd(c *ocap.Claims, recs []*kgo.Record, next int64) ([]*kgo.Record, int64) {
	if c.Offsets == nil || c.Offsets.To == 0 {
		return recs, next
	}
	end := c.Offsets.To
	for i, r := range recs {
		if r.Offset >= end {
			return recs[:i], end
		}
	}
	return recs, min(next, end)
}

// rangeLimited reports a capability whose offset range is narrower than
// the whole partition.
func rangeLimited(c *ocap.Claims) bool {
	return c.Offsets != nil && (c.Offsets.From > 0 || c.Offsets.To != 0)
}

// acceptsRecordBatch reads negotiation's verdict (accept.go): raw batches
// exactly when the Accept header is the record-batch type.
func acceptsRecordBatch(h *fasthttp.RequestHeader) bool {
	return string(h.Peek(fasthttp.HeaderAccept)) == api.MediaRecordBatch
}

// fetchError answers a failed broker fetch.
func (g *Gateway) fetchError(ctx *fasthttp.RequestCtx, cancelled, err error) api.Code {
	var oor *broker.OffsetOutOfRangeError
	switch {
	case errors.As(err, &oor):
		writeError(ctx, api.CodeOffsetOutOfRange, "offset outside the partition's log",
			map[string]any{"offset": oor.Offset, "earliest": oor.Earliest, "latest": oor.Latest})
		return api.CodeOffsetOutOfRange
	case errors.Is(err, broker.ErrUnknownTopicOrPartition):
		writeError(ctx, api.CodeNotFound, "unknown topic or partition", nil)
		return api.CodeNotFound
	case errors.Is(cancelled, errFenced):
		// Cancelled by a revocation that a later snapshot undid: still refuse.
		writeError(ctx, api.CodeCapabilityRevoked, "capability revoked while the fetch was in flight", nil)
		return api.CodeCapabilityRevoked
	case errors.Is(cancelled, errShuttingDown):
		setRetryAfter(ctx, time.Second)
		writeError(ctx, api.CodeUnavailable, "gateway shutting down; retry on another gateway", nil)
		return api.CodeUnavailable
	}
	return g.brokerFailure(ctx, err)
}

// brokerFailure answers 503 unavailable (retriable, no leader or broker)
// or 502 broker_error saying what failed (broker.Public: the operation
// and Kafka's error code, never a broker's address); the whole error goes
// to the log.
func (g *Gateway) brokerFailure(ctx *fasthttp.RequestCtx, err error) api.Code {
	code := api.CodeBrokerError
	if errors.Is(err, broker.ErrBrokerUnavailable) || errors.Is(err, context.DeadlineExceeded) {
		code = api.CodeUnavailable
		setRetryAfter(ctx, time.Second)
	}
	g.log.Debug("broker call failed", zap.String("code", string(code)), zap.Error(err))
	writeError(ctx, code, broker.Public(err), nil)
	return code
}
