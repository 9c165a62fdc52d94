package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/capgate/capgate/api"
)

// Sync answers. encoding/json decoded a fence in ~1.3 µs (reflection,
// a string per group and topic), and the fences are the one list of an
// answer that grows with partitions: a revoke of a member holding 10,000
// partitions cost each gateway ~13 ms of decoding, 16 of them on two
// cores most of DESIGN §12's 200 ms bulk fence (BENCHMARKS §3).
// scanSync reads the one shape the coordinator writes — compact JSON,
// each fence {"group":"…","topic":"…","partition":N,"epoch":N} with
// printable-ASCII names and no escapes — in one pass, a group's and a
// topic's string shared by the fences in a row that name it; every other
// member of the answer still goes through encoding/json. Anything else
// (whitespace, escapes, another key order, a null, a number out of
// range, an unknown key, a repeated one) is left whole to encoding/json,
// strict as before: an update this gateway cannot understand is never
// acknowledged. Written by hand because the well-kept alternative tried,
// valyala/fastjson, builds a value tree per answer and measured slower
// than encoding/json in the gateways' sync loop (BENCHMARKS §3).

// decodeSync reads one sync answer (api.SyncResponse) from r, at most
// limit bytes of it.
func decodeSync(r io.Reader, limit int64) (api.SyncResponse, error) {
	body, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return api.SyncResponse{}, err
	}
	if int64(len(body)) > limit {
		return api.SyncResponse{}, fmt.Errorf("answer larger than %d bytes", limit)
	}
	return parseSync(body)
}

// parseSync decodes body, one whole sync answer.
func parseSync(body []byte) (api.SyncResponse, error) {
	if u, ok := scanSync(body); ok {
		return u, nil
	}
	return strictSync(body)
}

// strictSync is encoding/json's reading of a sync answer, unknown keys
// refused.
func strictSync(body []byte) (api.SyncResponse, error) {
	var u api.SyncResponse
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err := dec.Decode(&u)
	return u, err
}

// syncKeys are api.SyncResponse's members as the coordinator spells them.
var syncKeys = map[string]bool{"seq": true, "reset": true, "keys": true, "fences": true, "denied": true,
	"revoked_members": true, "qos": true, "settings": true}

// scanSync is the fast path: ok false leaves body to strictSync.
func scanSync(body []byte) (api.SyncResponse, bool) {
	s := scanner{b: body}
	if !s.byte('{') {
		return api.SyncResponse{}, false
	}
	var u api.SyncResponse
	rest := make([]byte, 0, 256)
	rest = append(rest, '{')
	fences := false
	for first := true; ; first = false {
		if first && s.byte('}') { // only an empty object ends here: after a comma a '}' is not consumed
			break
		}
		start := s.i
		key, ok := s.plainString()
		if !ok || !s.byte(':') || !syncKeys[string(key)] {
			return api.SyncResponse{}, false // encoding/json matches keys in any case: its call
		}
		if string(key) == "fences" {
			if fences {
				return api.SyncResponse{}, false
			}
			fences = true
			if u.Fences, ok = s.fences(); !ok {
				return api.SyncResponse{}, false
			}
		} else {
			if !s.skipValue() {
				return api.SyncResponse{}, false
			}
			if len(rest) > 1 {
				rest = append(rest, ',')
			}
			rest = append(rest, body[start:s.i]...)
		}
		if s.byte('}') {
			break
		}
		if !s.byte(',') {
			return api.SyncResponse{}, false
		}
	}
	if s.i != len(body) {
		return api.SyncResponse{}, false
	}
	dec := json.NewDecoder(bytes.NewReader(append(rest, '}')))
	dec.DisallowUnknownFields() // rest holds no fences key: syncKeys took only the exact one
	if err := dec.Decode(&u); err != nil {
		return api.SyncResponse{}, false
	}
	return u, true
}

// scanner reads compact JSON; every method consumes only on success
// (a failed read may leave i anywhere: the caller gives up).
type scanner struct {
	b []byte
	i int
}

func (s *scanner) byte(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *scanner) lit(l string) bool {
	if len(s.b)-s.i >= len(l) && string(s.b[s.i:s.i+len(l)]) == l {
		s.i += len(l)
		return true
	}
	return false
}

// plainString reads a string of printable ASCII without escapes and
// returns its content (aliasing the body).
func (s *scanner) plainString() ([]byte, bool) {
	if !s.byte('"') {
		return nil, false
	}
	start := s.i
	for ; s.i < len(s.b); s.i++ {
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return s.b[start : s.i-1], true
		case c < 0x20 || c >= 0x7f || c == '\\':
			return nil, false
		}
	}
	return nil, false
}

// integer reads -?(0|[1-9][0-9]*) as an int64 within [lo, hi].
func (s *scanner) integer(lo, hi int64) (int64, bool) {
	neg := s.byte('-')
	if neg && lo >= 0 {
		return 0, false
	}
	start := s.i
	var n uint64
	for ; s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9'; s.i++ {
		if s.i-start >= 19 { // more digits than any int64
			return 0, false
		}
		n = n*10 + uint64(s.b[s.i]-'0')
	}
	switch {
	case s.i == start, s.i-start > 1 && s.b[start] == '0':
		return 0, false
	case neg && n <= uint64(-lo):
		return -int64(n), true
	case !neg && n <= uint64(hi):
		return int64(n), true
	}
	return 0, false
}

// uint64 reads 0|[1-9][0-9]* within uint64.
func (s *scanner) uint64() (uint64, bool) {
	start := s.i
	var n uint64
	for ; s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9'; s.i++ {
		d := uint64(s.b[s.i] - '0')
		if n > (math.MaxUint64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	if s.i == start || s.i-start > 1 && s.b[start] == '0' {
		return 0, false
	}
	return n, true
}

// fences reads [fence,…] in the coordinator's shape.
func (s *scanner) fences() ([]api.Fence, bool) {
	if !s.byte('[') {
		return nil, false
	}
	out := make([]api.Fence, 0, (len(s.b)-s.i)/56) // a fence is ≥ 56 bytes
	if s.byte(']') {
		return out, true
	}
	var group, topic string
	for {
		var f api.Fence
		if !s.lit(`{"group":`) {
			return nil, false
		}
		g, ok := s.plainString()
		if !ok || !s.lit(`,"topic":`) {
			return nil, false
		}
		if string(g) != group {
			group = string(g)
		}
		t, ok := s.plainString()
		if !ok || !s.lit(`,"partition":`) {
			return nil, false
		}
		if string(t) != topic {
			topic = string(t)
		}
		p, ok := s.integer(math.MinInt32, math.MaxInt32)
		if !ok || !s.lit(`,"epoch":`) {
			return nil, false
		}
		if f.Epoch, ok = s.uint64(); !ok || !s.byte('}') {
			return nil, false
		}
		f.Group, f.Topic, f.Partition = group, topic, int32(p)
		out = append(out, f)
		if s.byte(']') {
			return out, true
		}
		if !s.byte(',') {
			return nil, false
		}
	}
}

// skipValue moves past one compact JSON value without checking it
// (encoding/json does, on the members it is handed): strings with their
// escapes, nested objects and arrays, numbers and literals.
func (s *scanner) skipValue() bool {
	depth := 0
	for s.i < len(s.b) {
		switch c := s.b[s.i]; c {
		case '"':
			s.i++
			for s.i < len(s.b) && s.b[s.i] != '"' {
				if s.b[s.i] == '\\' {
					s.i++
				}
				s.i++
			}
			if s.i >= len(s.b) {
				return false
			}
			s.i++
		case '{', '[':
			depth++
			s.i++
			continue
		case '}', ']':
			if depth == 0 {
				return false
			}
			depth--
			s.i++
		case ',', ':':
			if depth == 0 {
				return false
			}
			s.i++
			continue
		default:
			if c <= ' ' { // whitespace: not the coordinator's compact JSON
				return false
			}
			s.i++
			for s.i < len(s.b) && strings.IndexByte(",:{}[]\" \t\r\n", s.b[s.i]) < 0 {
				s.i++
			}
		}
		if depth == 0 {
			return true
		}
	}
	return false
}
