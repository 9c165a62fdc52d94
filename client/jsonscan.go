package client

import (
	"bytes"
	"encoding/base64"
	"time"

	"github.com/capgate/capgate/client/session"
)

// scanFetchJSON reads a JSON fetch answer of the gateway's shape in one
// pass (see jsonfetch.go for why it is hand-written). ok is false for
// anything else — another shape, or broken JSON — and the caller then
// decodes with fastjson, which also reports the errors.
func scanFetchJSON(body []byte, req session.Fetch) (res fetched, ok bool) {
	s := jsonScanner{b: body, arena: make([]byte, 0, base64.StdEncoding.DecodedLen(len(body)))}
	res = fetched{next: req.Offset}
	wireNext := int64(-1)
	if !s.byte('{') {
		return fetched{}, false
	}
	for first := true; ; first = false {
		if s.byte('}') {
			break
		}
		if !first && !s.byte(',') {
			return fetched{}, false
		}
		key, ok := s.str()
		if !ok || !s.byte(':') {
			return fetched{}, false
		}
		switch string(key) {
		case "records":
			if !s.records(&res, req) {
				return fetched{}, false
			}
		case "next_offset":
			if wireNext, ok = s.int(); !ok {
				return fetched{}, false
			}
		case "high_watermark":
			if _, ok = s.int(); !ok {
				return fetched{}, false
			}
		default:
			return fetched{}, false
		}
	}
	s.space()
	if s.i != len(s.b) || res.records == nil {
		return fetched{}, false
	}
	res.next = max(res.next, wireNext)
	return res, true
}

var offsetKey = []byte(`{"offset":`)

// jsonScanner walks b; arena receives the decoded base64 fields (never
// grown past its capacity, so earlier slices stay valid).
type jsonScanner struct {
	b     []byte
	i     int
	arena []byte
}

func (s *jsonScanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// byte consumes c (after white space) if it is next.
func (s *jsonScanner) byte(c byte) bool {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// str reads a string without escapes (false on an escape: fastjson
// decodes those answers) and without control characters.
func (s *jsonScanner) str() ([]byte, bool) {
	out, ok := s.raw()
	if !ok {
		return nil, false
	}
	for _, c := range out {
		if c < 0x20 {
			return nil, false
		}
	}
	return out, true
}

// raw reads a string without escapes, leaving control characters to the
// caller (base64 decoding refuses them but for CR and LF, which raw
// refuses itself). The ends are found with bytes.IndexByte, which is
// vectorized: most of an answer is base64 values.
func (s *jsonScanner) raw() ([]byte, bool) {
	if !s.byte('"') {
		return nil, false
	}
	end := bytes.IndexByte(s.b[s.i:], '"')
	if end < 0 {
		return nil, false
	}
	out := s.b[s.i : s.i+end]
	if bytes.IndexByte(out, '\\') >= 0 || bytes.IndexByte(out, '\n') >= 0 || bytes.IndexByte(out, '\r') >= 0 {
		return nil, false
	}
	s.i += end + 1
	return out, true
}

// int reads an integer (no fraction or exponent).
func (s *jsonScanner) int() (int64, bool) {
	s.space()
	neg := s.i < len(s.b) && s.b[s.i] == '-'
	if neg {
		s.i++
	}
	start := s.i
	var n int64
	for ; s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9'; s.i++ {
		if n > (1<<63-1)/10-1 {
			return 0, false
		}
		n = n*10 + int64(s.b[s.i]-'0')
	}
	if s.i == start || (s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E')) {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}

// null consumes a null if it is next.
func (s *jsonScanner) null() bool {
	s.space()
	if len(s.b)-s.i >= 4 && string(s.b[s.i:s.i+4]) == "null" {
		s.i += 4
		return true
	}
	return false
}

// bytes reads a base64 string into the arena (nil for null, empty for "").
func (s *jsonScanner) bytes() ([]byte, bool) {
	if s.null() {
		return nil, true
	}
	enc, ok := s.raw()
	if !ok || base64.StdEncoding.DecodedLen(len(enc)) > cap(s.arena)-len(s.arena) {
		return nil, false
	}
	start := len(s.arena)
	out, err := base64.StdEncoding.AppendDecode(s.arena, enc)
	if err != nil {
		return nil, false
	}
	s.arena = out
	return out[start:len(out):len(out)], true
}

func (s *jsonScanner) records(res *fetched, req session.Fetch) bool {
	if !s.byte('[') {
		return false
	}
	// The gateway writes "offset" first in every record: a vectorized
	// count sizes the slice once (a hint; any shape still decodes).
	res.records = make([]Record, 0, bytes.Count(s.b[s.i:], offsetKey))
	for first := true; ; first = false {
		if s.byte(']') {
			return true
		}
		if !first && !s.byte(',') {
			return false
		}
		r := Record{Topic: req.Partition.Topic, Partition: req.Partition.Partition, Epoch: req.Epoch, Timestamp: time.UnixMilli(0)}
		if !s.record(&r) {
			return false
		}
		if r.Offset < res.next {
			continue
		}
		res.bytes += r.size()
		res.records = append(res.records, r)
		res.next = r.Offset + 1
	}
}

func (s *jsonScanner) record(r *Record) bool {
	if !s.byte('{') {
		return false
	}
	for first := true; ; first = false {
		if s.byte('}') {
			return true
		}
		if !first && !s.byte(',') {
			return false
		}
		key, ok := s.str()
		if !ok || !s.byte(':') {
			return false
		}
		switch string(key) {
		case "offset":
			r.Offset, ok = s.int()
		case "timestamp":
			var ms int64
			ms, ok = s.int()
			r.Timestamp = time.UnixMilli(ms)
		case "key":
			r.Key, ok = s.bytes()
		case "value":
			r.Value, ok = s.bytes()
		case "headers":
			r.Headers, ok = s.headers()
		default:
			ok = false
		}
		if !ok {
			return false
		}
	}
}

func (s *jsonScanner) headers() ([]Header, bool) {
	if s.null() {
		return nil, true
	}
	if !s.byte('[') {
		return nil, false
	}
	var out []Header
	for first := true; ; first = false {
		if s.byte(']') {
			if out == nil {
				out = []Header{}
			}
			return out, true
		}
		if !first && !s.byte(',') {
			return nil, false
		}
		h, ok := s.header()
		if !ok {
			return nil, false
		}
		out = append(out, h)
	}
}

func (s *jsonScanner) header() (Header, bool) {
	var h Header
	var seenKey bool
	if !s.byte('{') {
		return h, false
	}
	for first := true; ; first = false {
		if s.byte('}') {
			return h, seenKey
		}
		if !first && !s.byte(',') {
			return h, false
		}
		name, ok := s.str()
		if !ok || !s.byte(':') {
			return h, false
		}
		switch string(name) {
		case "key":
			var k []byte
			k, ok = s.str()
			h.Key, seenKey = string(k), true
		case "value":
			h.Value, ok = s.bytes()
		default:
			ok = false
		}
		if !ok {
			return h, false
		}
	}
}
