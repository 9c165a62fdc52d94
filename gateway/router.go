package gateway

import (
	"bytes"
	"errors"
	"net"

	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
)

// Routes (DESIGN §5): anything else is 404, a known path with another
// method 405 with Allow.
const (
	pathHealth   = "/healthz"
	pathReady    = "/readyz"
	pathMetrics  = "/metrics"
	recordsStart = "/v1/topics/"
	recordsMid   = "/partitions/"
	recordsEnd   = "/records"
)

func (g *Gateway) handle(ctx *fasthttp.RequestCtx) {
	if contentLengthWithTransferEncoding(&ctx.Request.Header) {
		ctx.SetConnectionClose()
		writeError(ctx, api.CodeBadRequest, "Content-Length together with Transfer-Encoding", nil)
		g.metrics.rejected(api.CodeBadRequest)
		return
	}
	path := ctx.Path()
	switch string(path) {
	case pathHealth:
		g.routeMethods(ctx, "GET, HEAD", g.handleHealth)
		return
	case pathReady:
		g.routeMethods(ctx, "GET, HEAD", g.handleReady)
		return
	case pathMetrics:
		g.routeMethods(ctx, "GET", g.metrics.serve)
		return
	}
	topic, partition, ok := splitRecordsPath(path)
	if !ok {
		writeError(ctx, api.CodeNotFound, "no such route", nil)
		g.metrics.rejected(api.CodeNotFound)
		return
	}
	switch {
	case ctx.IsGet():
		g.fetchRecords(ctx, topic, partition)
	case ctx.IsPost():
		g.produceRecords(ctx, topic, partition)
	default:
		g.methodNotAllowed(ctx, "GET, POST")
	}
}

func (g *Gateway) routeMethods(ctx *fasthttp.RequestCtx, allow string, h fasthttp.RequestHandler) {
	if ctx.IsGet() || (ctx.IsHead() && allow != "GET") {
		h(ctx)
		return
	}
	g.methodNotAllowed(ctx, allow)
}

func (g *Gateway) methodNotAllowed(ctx *fasthttp.RequestCtx, allow string) {
	ctx.Response.Header.Set(fasthttp.HeaderAllow, allow)
	writeError(ctx, api.CodeMethodNotAllowed, "method not allowed; allowed: "+allow, nil)
	g.metrics.rejected(api.CodeMethodNotAllowed)
}

// splitRecordsPath splits /v1/topics/{topic}/partitions/{p}/records; topic
// and partition are slices of path, still to be validated.
func splitRecordsPath(path []byte) (topic, partition []byte, ok bool) {
	rest, ok := bytes.CutPrefix(path, []byte(recordsStart))
	if !ok {
		return nil, nil, false
	}
	rest, ok = bytes.CutSuffix(rest, []byte(recordsEnd))
	if !ok {
		return nil, nil, false
	}
	topic, partition, ok = bytes.Cut(rest, []byte(recordsMid))
	if !ok || len(topic) == 0 || len(partition) == 0 || bytes.IndexByte(topic, '/') >= 0 || bytes.IndexByte(partition, '/') >= 0 {
		return nil, nil, false
	}
	return topic, partition, true
}

// contentLengthWithTransferEncoding reports a request framed both ways, a
// request-smuggling shape (RFC 9112 §6.3). fasthttp keeps the chunked
// framing, drops Content-Length, and after reading the body even drops
// Transfer-Encoding, so look at the raw header lines.
func contentLengthWithTransferEncoding(h *fasthttp.RequestHeader) bool {
	var cl, te bool
	for line := range bytes.SplitSeq(h.RawHeaders(), []byte("\n")) {
		if len(line) == 0 || (line[0]|0x20 != 'c' && line[0]|0x20 != 't') {
			continue
		}
		name, _, _ := bytes.Cut(line, []byte(":"))
		cl = cl || bytes.EqualFold(name, []byte(fasthttp.HeaderContentLength))
		te = te || bytes.EqualFold(name, []byte(fasthttp.HeaderTransferEncoding))
	}
	return cl && te
}

// handleServerError answers what fasthttp could not parse: oversize
// headers (431), oversize bodies (413), timeouts and malformed requests
// (400). fasthttp closes the connection afterwards.
func (g *Gateway) handleServerError(ctx *fasthttp.RequestCtx, err error) {
	var small *fasthttp.ErrSmallBuffer
	var netErr net.Error
	code, message := api.CodeBadRequest, "malformed request"
	switch {
	case errors.As(err, &small):
		code, message = api.CodeHeadersTooLarge, "request headers larger than max_header_bytes"
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		code, message = api.CodeBodyTooLarge, "request body larger than max_body_bytes"
	case errors.As(err, &netErr) && netErr.Timeout():
		// No whole request within read_timeout: an idle pre-dialed
		// connection or slow headers. Close without an answer: a client
		// would read a response to a request it never sent.
		ctx.Conn().Close()
		g.metrics.rejected(code)
		return
	}
	writeError(ctx, code, message, nil)
	g.metrics.rejected(code)
}
