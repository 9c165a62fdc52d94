package client

import (
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/valyala/fastjson"

	"github.com/capgate/capgate/client/session"
)

// JSON fetch answers: encoding/json decoded them through reflection and a
// []byte per key and value, several times slower than the raw batches
// (issue #13). The gateway writes one fixed shape (gateway/recordjson.go:
// known keys, integers, base64 strings that never need escapes), which
// scanFetchJSON reads in one pass without building a tree. It is
// hand-written because valyala/fastjson, the fastest well-kept parser we
// tried, measured only 2.2–2.6× encoding/json here (it builds a value
// tree and copies the body first), short of the 3× asked for; fastjson
// still decodes every answer the scanner does not recognise (another key
// order is fine; escapes, floats or unknown keys are not), so any valid
// answer decodes, and a broken one is refused by fastjson's errors. Keys,
// values and header values are base64-decoded into one buffer per
// answer, and the records alias it, as raw batches alias theirs.

var jsonParsers fastjson.ParserPool

// errNotRecords is an answer that is JSON but not a records answer.
var errNotRecords = errors.New(`decode answer: not a records answer (want {"records":[...],"next_offset":...})`)

// decodeJSON reads a JSON fetch answer (api.FetchResponse), dropping
// records before the requested offset.
func decodeJSON(body []byte, req session.Fetch) (fetched, error) {
	if res, ok := scanFetchJSON(body, req); ok {
		return res, nil
	}
	return parseFetchJSON(body, req)
}

// parseFetchJSON is decodeJSON through fastjson.
func parseFetchJSON(body []byte, req session.Fetch) (fetched, error) {
	p := jsonParsers.Get()
	defer jsonParsers.Put(p)
	v, err := p.ParseBytes(body)
	if err != nil {
		return fetched{}, fmt.Errorf("decode answer: %w", err)
	}
	list := v.Get("records")
	if v.Type() != fastjson.TypeObject || list == nil {
		return fetched{}, errNotRecords
	}
	wire, err := list.Array()
	if err != nil {
		return fetched{}, fmt.Errorf("decode answer: records: %w", err)
	}
	d := jsonDecoder{arena: make([]byte, 0, base64.StdEncoding.DecodedLen(len(body)))}
	res := fetched{records: make([]Record, 0, len(wire)), next: req.Offset}
	for _, w := range wire {
		r, err := d.record(w, req)
		if err != nil {
			return fetched{}, err
		}
		if r.Offset < res.next {
			continue
		}
		res.bytes += r.size()
		res.records = append(res.records, r)
		res.next = r.Offset + 1
	}
	if n := v.Get("next_offset"); n != nil {
		next, err := n.Int64()
		if err != nil {
			return fetched{}, fmt.Errorf("decode answer: next_offset: %w", err)
		}
		res.next = max(res.next, next)
	}
	return res, nil
}

// jsonDecoder decodes base64 fields into one arena; it never grows past
// the capacity it was given (the whole body's decoded length), so earlier
// slices stay valid.
type jsonDecoder struct {
	arena []byte
}

func (d *jsonDecoder) record(w *fastjson.Value, req session.Fetch) (Record, error) {
	o, err := w.Object()
	if err != nil {
		return Record{}, fmt.Errorf("decode answer: record: %w", err)
	}
	r := Record{Topic: req.Partition.Topic, Partition: req.Partition.Partition, Epoch: req.Epoch, Timestamp: time.UnixMilli(0)}
	o.Visit(func(key []byte, v *fastjson.Value) {
		if err != nil {
			return
		}
		switch string(key) {
		case "offset":
			r.Offset, err = v.Int64()
		case "timestamp":
			var ms int64
			ms, err = v.Int64()
			r.Timestamp = time.UnixMilli(ms)
		case "key":
			r.Key, err = d.bytes(v)
		case "value":
			r.Value, err = d.bytes(v)
		case "headers":
			r.Headers, err = d.headers(v)
		}
	})
	if err != nil {
		return Record{}, fmt.Errorf("decode answer: record: %w", err)
	}
	return r, nil
}

// bytes decodes a base64 string (nil for null; empty, not nil, for "").
func (d *jsonDecoder) bytes(v *fastjson.Value) ([]byte, error) {
	if v == nil || v.Type() == fastjson.TypeNull {
		return nil, nil
	}
	s, err := v.StringBytes()
	if err != nil {
		return nil, err
	}
	start := len(d.arena)
	need := base64.StdEncoding.DecodedLen(len(s))
	if need > cap(d.arena)-start {
		// Cannot happen for fields of the body the arena was sized
		// for; never grow (that would move what earlier records alias).
		d.arena = make([]byte, 0, need)
		start = 0
	}
	out, err := base64.StdEncoding.AppendDecode(d.arena, s)
	if err != nil {
		return nil, err
	}
	d.arena = out
	return out[start:len(out):len(out)], nil
}

func (d *jsonDecoder) headers(v *fastjson.Value) ([]Header, error) {
	if v == nil || v.Type() == fastjson.TypeNull {
		return nil, nil
	}
	list, err := v.Array()
	if err != nil {
		return nil, err
	}
	out := make([]Header, 0, len(list))
	for _, h := range list {
		k := h.Get("key")
		if k == nil {
			return nil, errors.New("header without a key")
		}
		key, err := k.StringBytes()
		if err != nil {
			return nil, fmt.Errorf("header key: %w", err)
		}
		value, err := d.bytes(h.Get("value"))
		if err != nil {
			return nil, fmt.Errorf("header value: %w", err)
		}
		out = append(out, Header{Key: string(key), Value: value})
	}
	return out, nil
}
