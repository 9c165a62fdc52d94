package gateway

// Behavior: POST /v1/topics/{topic}/partitions/{p}/records with
// "Authorization: Bearer <capability>" holding the produce op for exactly
// this topic and partition, and a JSON body api.ProduceRequest
// {"records":[{"key","value","headers"}]} (base64 bytes, at least one
// record and at most max_produce_records, unknown fields refused,
// Content-Type application/json or none, no Content-Encoding but
// identity: 415 unsupported_media_type otherwise).
// The records are appended in order to the partition leader with acks=all;
// 200 {"base_offset","count"}. No query parameters. The byte rate of the
// capability's QoS counts request body bytes. A produce is in flight
// like a fetch (the same caps: 429 too_many_fetches, 503 overloaded), and
// a revocation's acknowledgement waits until Kafka answered it: nothing
// admitted under a revoked capability lands after the ack. Refusals as
// for fetch: 400, 401, 403, 404, 409, 413 (body over max_body_bytes),
// 415, 429, 502, 503.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/broker"
	"github.com/capgate/capgate/gateway/authz"
	"github.com/capgate/capgate/ocap"
)

func (g *Gateway) produceRecords(ctx *fasthttp.RequestCtx, topic, partition []byte) {
	c := call{g: g, ctx: ctx, op: opProduce, start: ctx.Time()}
	code := c.produce(topic, partition)
	c.finish(code)
}

func (c *call) produce(topic, partition []byte) api.Code {
	ctx := c.ctx
	p, problem := recordsTarget(topic, partition)
	if problem != "" {
		writeError(ctx, api.CodeBadRequest, problem, nil)
		return api.CodeBadRequest
	}
	if code := produceRequestProblem(ctx); code != "" {
		return code
	}
	if _, code := c.admitCapability(topic, authz.Request{Partition: p, Op: ocap.OpProduce, Offset: -1}); code != "" {
		return code
	}
	recs, err := decodeProduce(ctx.PostBody(), c.g.cfg.MaxProduceRecords)
	if err != nil {
		writeError(ctx, api.CodeBadRequest, err.Error(), nil)
		return api.CodeBadRequest
	}
	// In flight like a fetch, under the same caps: a revocation's ack
	// waits until Kafka answered, so no record admitted under a revoked
	// capability lands after every gateway acknowledged the revocation.
	// The produce is never cancelled (its context is not the entry's): a
	// write cancelled on its way could still land, unseen.
	entry, _, refused := c.g.inflight.start(c.claims, c.req)
	if refused != hitNone {
		return c.refuseInflight(refused)
	}
	defer c.g.inflight.finish(entry)
	base, err := c.g.broker.Produce(context.Background(), c.req.Topic, c.req.Partition, recs)
	if c.g.afterProduce != nil {
		c.g.afterProduce()
	}
	if err != nil {
		if errors.Is(err, broker.ErrUnknownTopicOrPartition) {
			writeError(ctx, api.CodeNotFound, "unknown topic or partition", nil)
			return api.CodeNotFound
		}
		return c.g.brokerFailure(ctx, err)
	}
	c.bytes, c.records = len(ctx.PostBody()), len(recs)
	c.g.metrics.bytesIn.Add(float64(c.bytes))
	body, _ := json.Marshal(api.ProduceResponse{BaseOffset: base, Count: len(recs)})
	writeJSONBody(ctx, body)
	return ""
}

// produceRequestProblem refuses query parameters (400) and a body that
// is not plain JSON (415 unsupported_media_type, as on the coordinator):
// a Content-Type other than application/json (none is taken as JSON), a
// Content-Encoding other than identity (the gateway decodes none). It
// writes the answer and returns its code, or "".
func produceRequestProblem(ctx *fasthttp.RequestCtx) api.Code {
	if ctx.QueryArgs().Len() > 0 {
		writeError(ctx, api.CodeBadRequest, "produce takes no query parameters", nil)
		return api.CodeBadRequest
	}
	if ct := ctx.Request.Header.ContentType(); len(ct) > 0 && !api.IsJSON(ct) {
		writeError(ctx, api.CodeUnsupportedMediaType, fmt.Sprintf("Content-Type %.64q is not accepted: a produce body is application/json", ct), nil)
		return api.CodeUnsupportedMediaType
	}
	if problem := api.ContentCodingProblem(ctx.Request.Header.PeekAll(fasthttp.HeaderContentEncoding)); problem != "" {
		ctx.Response.Header.Set(fasthttp.HeaderAcceptEncoding, "identity")
		writeError(ctx, api.CodeUnsupportedMediaType, problem, nil)
		return api.CodeUnsupportedMediaType
	}
	return ""
}

// decodeProduce reads an api.ProduceRequest strictly into kgo records,
// one record at a time, refusing the max+1st before it is built (each
// record costs far more decoded than its bytes in the body).
func decodeProduce(body []byte, max int) ([]*kgo.Record, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := expectDelim(dec, '{', "a produce"); err != nil {
		return nil, err
	}
	var recs []*kgo.Record
	seen := false
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("body: %v", err)
		}
		if key != "records" || seen {
			return nil, fmt.Errorf("body: unexpected field %q; a produce is {\"records\":[...]}", key)
		}
		seen = true
		if recs, err = decodeRecords(dec, max); err != nil {
			return nil, err
		}
	}
	if err := expectDelim(dec, '}', "a produce"); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("body: trailing data after the JSON object")
	}
	if len(recs) == 0 {
		return nil, errors.New("body: records must hold at least one record")
	}
	return recs, nil
}

// decodeRecords reads the records array, at most max of them.
func decodeRecords(dec *json.Decoder, max int) ([]*kgo.Record, error) {
	if err := expectDelim(dec, '[', `"records"`); err != nil {
		return nil, err
	}
	var recs []*kgo.Record
	for dec.More() {
		if len(recs) == max {
			return nil, fmt.Errorf("body: more than %d records (max_produce_records); split the produce", max)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("body: %v", err)
		}
		// Each record as strictly as the coordinator reads a body: exact
		// names, no key twice ({"value":a,"value":b} is not a record a
		// proxy and capgate may read differently).
		var r api.ProduceRecord
		if err := api.StrictJSON(raw, &r); err != nil {
			return nil, fmt.Errorf("body: records[%d]: %v", len(recs), err)
		}
		rec := &kgo.Record{Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		recs = append(recs, rec)
	}
	return recs, expectDelim(dec, ']', `"records"`)
}

// expectDelim reads the next token, which must be want; what names the
// value for the message ("records" must be a list of records, got null).
func expectDelim(dec *json.Decoder, want json.Delim, what string) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("body: %v", err)
	}
	if d, ok := tok.(json.Delim); ok && d == want {
		return nil
	}
	switch want {
	case '{':
		return fmt.Errorf("body: %s must be a JSON object {\"records\":[...]}, got %s", what, jsonKind(tok))
	case '[':
		return fmt.Errorf("body: %s must be a list of records, got %s", what, jsonKind(tok))
	}
	return fmt.Errorf("body: %s: %s where %q was expected", what, jsonKind(tok), want)
}

// jsonKind says what a JSON token is, for a message.
func jsonKind(tok json.Token) string {
	switch t := tok.(type) {
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(t)
	case string:
		return "a string"
	case float64, json.Number:
		return "a number"
	case json.Delim:
		switch t {
		case '{':
			return "an object"
		case '[':
			return "a list"
		}
		return fmt.Sprintf("%q", t)
	}
	return fmt.Sprintf("%v", tok)
}
