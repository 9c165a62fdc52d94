package gateway

// Behavior: POST /v1/topics/{topic}/partitions/{p}/records with
// "Authorization: Bearer <capability>" holding the produce op for exactly
// this topic and partition, or "Bearer <client credential>" whose ops
// include produce and whose topics name this topic (any partition of it;
// produce_credential.go), and a JSON body api.ProduceRequest
// {"records":[{"key","value","headers"}]} (base64 bytes, strictly: one
// line, no \r or \n, unused bits zero — else 400 naming records[i] and
// the field, strictBase64; at least one
// record and at most max_produce_records, unknown fields refused,
// Content-Type application/json or none, no Content-Encoding but
// identity: 415 unsupported_media_type otherwise). Every record and
// header names its value: "value": null is a tombstone (a header's, a
// null header value), a left-out value 400 naming the record. A record
// over the producer's batch limit (maxRecordBatchBytes) refuses the
// produce 413 record_too_large before anything is sent; the broker's
// MESSAGE_TOO_LARGE / RECORD_LIST_TOO_LARGE are 413 record_too_large
// too, INVALID_RECORD 400 (refusedRecords). A refused request writes
// nothing, but for those broker refusals (an earlier batch of it may
// have been written).
// The records are appended in order to the partition leader with acks=all;
// 200 {"base_offset","count"}. No query parameters. The byte rate of the
// capability's QoS counts request body bytes. A produce is in flight
// like a fetch (the same caps: 429 too_many_fetches, 503 overloaded),
// decided again once registered, and a revocation's acknowledgement
// waits until Kafka answered it: nothing admitted under a revoked
// capability or denied credential lands after the ack. Refusals as
// for fetch: 400, 401, 403, 404, 409, 413 (body over max_body_bytes;
// record_too_large), 415, 429, 502, 503.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/broker"
)

func (g *Gateway) produceRecords(ctx *fasthttp.RequestCtx, topic, partition []byte) {
	c := call{g: g, ctx: ctx, op: opProduce, start: ctx.Time()}
	code := c.produce(topic, partition)
	c.finish(code)
}

func (c *call) produce(topic, partition []byte) api.Code {
	ctx := c.ctx
	if code := refuseNoBearer(ctx, "capability or client credential", ""); code != "" {
		return code
	}
	p, problem := recordsTarget(topic, partition)
	if problem != "" {
		writeError(ctx, api.CodeBadRequest, problem, nil)
		return api.CodeBadRequest
	}
	if code := produceRequestProblem(ctx); code != "" {
		return code
	}
	if code := c.admitProducer(topic, p); code != "" {
		return code
	}
	recs, code := c.produceBody()
	if code != "" {
		return code
	}
	finish, code := c.startProducing()
	if code != "" {
		return code
	}
	defer finish()
	base, err := c.g.broker.Produce(context.Background(), c.req.Topic, c.req.Partition, recs)
	if c.g.afterProduce != nil {
		c.g.afterProduce()
	}
	if err != nil {
		if errors.Is(err, broker.ErrUnknownTopicOrPartition) {
			writeError(ctx, api.CodeNotFound, "unknown topic or partition", nil)
			return api.CodeNotFound
		}
		if code, problem := refusedRecords(err); code != "" {
			writeError(ctx, code, problem, nil)
			return code
		}
		return c.g.brokerFailure(ctx, err)
	}
	c.bytes, c.records = len(ctx.PostBody()), len(recs)
	c.g.metrics.bytesIn.Add(float64(c.bytes))
	body, _ := json.Marshal(api.ProduceResponse{BaseOffset: base, Count: len(recs)})
	writeJSONBody(ctx, body)
	return ""
}

// produceBody reads the request's records (decodeProduce) and refuses a
// record over the producer's batch limit; on refusal it has answered
// and returns the code.
func (c *call) produceBody() ([]*kgo.Record, api.Code) {
	recs, err := decodeProduce(c.ctx.PostBody(), c.g.cfg.MaxProduceRecords)
	if err != nil {
		writeError(c.ctx, api.CodeBadRequest, err.Error(), nil)
		return nil, api.CodeBadRequest
	}
	if i, size := oversizedRecord(recs); i >= 0 {
		writeError(c.ctx, api.CodeRecordTooLarge, fmt.Sprintf("records[%d]: %d bytes as a Kafka record batch, over the producer's limit of %d bytes; nothing was written", i, size, maxRecordBatchBytes),
			map[string]any{"record": i, "record_batch_bytes": size, "max_record_batch_bytes": maxRecordBatchBytes})
		return nil, api.CodeRecordTooLarge
	}
	return recs, ""
}

// startProducing registers an admitted produce in flight, like a fetch
// and under the same caps, and decides it again (recheckProducer): a
// revocation's ack waits until Kafka answered, so no record admitted
// under a revoked capability or denied credential lands after every
// gateway acknowledged the revocation. The produce is never cancelled
// (its context is not the entry's): a write cancelled on its way could
// still land, unseen. finish unregisters it; on refusal it has answered.
func (c *call) startProducing() (finish func(), code api.Code) {
	entry, _, refused := c.g.inflight.start(c.claims, c.req)
	if refused != hitNone {
		return nil, c.refuseInflight(refused)
	}
	if code := c.recheckProducer(); code != "" {
		c.g.inflight.finish(entry)
		return nil, code
	}
	return func() { c.g.inflight.finish(entry) }, ""
}

// maxRecordBatchBytes is the largest record batch the gateway's producer
// sends (broker.MaxProduceBatchBytes, set on the producer by broker.New).
// A larger record is failed by kgo before it is sent while the produce's
// other records go on to the broker, so the gateway refuses the whole
// produce first.
const maxRecordBatchBytes = broker.MaxProduceBatchBytes

// oversizedRecord returns the index and batch size of the first record
// that alone makes a record batch over maxRecordBatchBytes, or -1.
func oversizedRecord(recs []*kgo.Record) (int, int) {
	for i, r := range recs {
		if size := oneRecordBatchBytes(r); size > maxRecordBatchBytes {
			return i, size
		}
	}
	return -1, 0
}

// oneRecordBatchBytes is the wire size of a v2 record batch holding r
// alone: the batch's 65 bytes (its array length included) and the
// record, timestamp and offset deltas 0. kgo counts as much or up to 2
// bytes less (its count depends on the produce version), so a record
// passing here is never failed by kgo for its size.
func oneRecordBatchBytes(r *kgo.Record) int {
	bytesField := func(b []byte) int {
		if b == nil {
			return varintLen(-1)
		}
		return varintLen(int64(len(b))) + len(b)
	}
	n := 1 + varintLen(0) + varintLen(0) + bytesField(r.Key) + bytesField(r.Value) + varintLen(int64(len(r.Headers)))
	for _, h := range r.Headers {
		n += varintLen(int64(len(h.Key))) + len(h.Key) + bytesField(h.Value)
	}
	return 65 + varintLen(int64(n)) + n
}

// varintLen is the length of x as a zigzag varint.
func varintLen(x int64) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutVarint(b[:], x)
}

// refusedRecords maps a broker's refusal of the records themselves to
// the client's error (4xx: sending them again cannot help) instead of a
// 502 that says retry: a record over the broker's message.max.bytes or
// the topic's max.message.bytes (MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE)
// is 413 record_too_large; one the broker finds invalid (INVALID_RECORD:
// e.g. without a key on a compacted topic) 400. Records of the produce
// in an earlier batch may have been written. "" for other errors.
func refusedRecords(err error) (api.Code, string) {
	switch {
	case errors.Is(err, kerr.MessageTooLarge), errors.Is(err, kerr.RecordListTooLarge):
		return api.CodeRecordTooLarge, "a record is larger than the broker takes (its message.max.bytes, or the topic's max.message.bytes): " + broker.Public(err)
	case errors.Is(err, kerr.InvalidRecord):
		return api.CodeBadRequest, "the broker refused a record as invalid (a record without a key on a compacted topic, for one): " + broker.Public(err)
	}
	return "", ""
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
		writeError(ctx, api.CodeUnsupportedMediaType, api.NotJSONProblem(ct), nil)
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
		if problem := missingField(raw); problem != "" {
			return nil, fmt.Errorf("body: records[%d]: %s", len(recs), problem)
		}
		rec := &kgo.Record{Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		recs = append(recs, rec)
	}
	return recs, expectDelim(dec, ']', `"records"`)
}

// recordPresence tells a field sent as null (a json.RawMessage of "null")
// from one left out (empty): decoded into []byte, both are nil. The raw
// base64 fields are checked strictly too (strictBase64).
type recordPresence struct {
	Key     json.RawMessage `json:"key"`
	Value   json.RawMessage `json:"value"`
	Headers []struct {
		Key   json.RawMessage `json:"key"`
		Value json.RawMessage `json:"value"`
	} `json:"headers"`
}

// missingField names a record's required field left out, or "": a
// record's value ("value": null is a tombstone, as in Kafka; a left-out
// value is refused, so a serializer dropping empty fields cannot delete a
// key on a compacted topic), a header's key and value (a header's
// "value": null is Kafka's null header value). raw already decoded
// strictly as an api.ProduceRecord.
func missingField(raw []byte) string {
	var r recordPresence
	if err := json.Unmarshal(raw, &r); err != nil {
		return err.Error()
	}
	if len(r.Value) == 0 {
		return `value is required; send "value": null for a tombstone`
	}
	for i, h := range r.Headers {
		if len(h.Key) == 0 || string(h.Key) == "null" {
			return fmt.Sprintf("headers[%d]: key is required (a string)", i)
		}
		if len(h.Value) == 0 {
			return fmt.Sprintf(`headers[%d]: value is required; send "value": null for a null header value`, i)
		}
	}
	if problem := strictBase64(r.Key); problem != "" {
		return "key: " + problem
	}
	if problem := strictBase64(r.Value); problem != "" {
		return "value: " + problem
	}
	for i, h := range r.Headers {
		if problem := strictBase64(h.Value); problem != "" {
			return fmt.Sprintf("headers[%d]: value: %s", i, problem)
		}
	}
	return ""
}

// strictBase64 says what encoding/json accepted in raw, a JSON string it
// already decoded as standard base64, that strict base64 refuses, or "":
// Go's decoder skips \r and \n anywhere ("aGVsbG8=\n" was produced as
// "hello": two spellings of one record, where a proxy or another reader
// may see only one), and takes a last character whose unused bits are
// not zero (RFC 4648 §3.5: "aGVsbG9=" read as "hello" too). A string
// without a backslash escape holds no line break (JSON has no raw
// control characters), so only the last quantum is looked at.
func strictBase64(raw json.RawMessage) string {
	if len(raw) < 2 || raw[0] != '"' {
		return "" // absent or null
	}
	b := raw[1 : len(raw)-1]
	if bytes.IndexByte(b, '\\') >= 0 {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return ""
		}
		if i := strings.IndexAny(s, "\r\n"); i >= 0 {
			return fmt.Sprintf("base64 with a line break (%q at character %d): send it on one line, as standard base64 without \\r or \\n (RFC 4648 §3.1)", s[i:i+1], i)
		}
		b = []byte(s)
	}
	if n := len(b); n >= 4 && n%4 == 0 {
		var out [3]byte
		if _, err := base64.StdEncoding.Strict().Decode(out[:], b[n-4:]); err != nil {
			return fmt.Sprintf("not canonical base64: in its last four characters %q the bits past the data must be zero (RFC 4648 §3.5)", b[n-4:])
		}
	}
	return ""
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
