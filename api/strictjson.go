package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
)

// StrictJSONDepthMax bounds how deep objects and arrays may nest in a
// body StrictJSON reads; no request body of either process comes near it.
const StrictJSONDepthMax = 32

// strictSeenLinear is how many keys an object's duplicate check compares
// one by one; a larger object (a map with many keys) gets a set, so the
// check stays linear in the body.
const strictSeenLinear = 16

// StrictJSON decodes body, exactly one JSON value, into dst (a pointer),
// refusing what encoding/json lets through and a proxy in front may read
// otherwise:
//   - a key twice in one object, at any depth (encoding/json keeps the
//     last, many other parsers the first; I-JSON, RFC 7493 §2.3, forbids
//     it), compared as encoding/json unescapes them, so "top\u0069cs"
//     repeats "topics";
//   - a key of a struct that is not exactly one of its json names
//     (encoding/json also takes "TOPICS" for "topics"), and any unknown
//     key (DisallowUnknownFields);
//   - nesting deeper than StrictJSONDepthMax, and anything after the value.
//
// The check walks the body following dst's type: structs by json name
// (embedded structs' names promoted as encoding/json does), maps any key,
// slices and arrays their element, pointers their target. Interfaces,
// json.RawMessage and types with their own UnmarshalJSON are not
// descended (their keys are theirs to check; duplicates are still
// refused). Only a body that passes is decoded, by encoding/json. A body
// that is not JSON gets encoding/json's error, whatever else is wrong
// with it. Errors name the key and where it is: `duplicate key "topic"
// in offsets[0]`, `unknown field "TOPICS" (did you mean "topics"?)`; so
// do those of a value of the wrong JSON type, which encoding/json finds
// and words for Go (typeError): `field "partition" in offsets[0]: want an
// integer, got a string`.
func StrictJSON(body []byte, dst any) error {
	w := strictWalker{b: body}
	err := w.value(reflect.TypeOf(dst), 0)
	if err == nil {
		if w.space(); w.i < len(w.b) {
			err = errNotJSON
		}
	}
	if err != nil {
		if err == errNotJSON || !json.Valid(body) {
			return invalidJSON(body)
		}
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err = dec.Decode(dst)
	if te, ok := err.(*json.UnmarshalTypeError); ok {
		return typeError(body, te)
	}
	return err
}

// errNotJSON is the walk's: the body is no JSON value; encoding/json says
// why (invalidJSON).
var errNotJSON = errors.New("invalid JSON")

// invalidJSON is encoding/json's reason body is no JSON value, found
// without decoding into anyone's struct.
func invalidJSON(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	var v any
	if err := dec.Decode(&v); err != nil {
		return err
	}
	if _, err := dec.Token(); errors.Is(err, io.EOF) {
		return errNotJSON // not reached: the walk and encoding/json agree
	}
	return errors.New("trailing data after the JSON value")
}

// strictError is a refused key (or a nesting too deep): what, where (the
// steps from the refused object up to the top, innermost first, added as
// the walk returns, so a body that passes pays nothing for them) and a
// hint.
type strictError struct {
	what  string
	steps []strictStep
	hint  string
}

// strictStep is one step of a path: an object's key, or an array's index
// when key is "".
type strictStep struct {
	key   string
	index int
}

func (e *strictError) Error() string {
	var b strings.Builder
	b.WriteString(e.what)
	if len(e.steps) > 0 {
		b.WriteString(" in ")
	}
	for i := len(e.steps) - 1; i >= 0; i-- {
		switch s := e.steps[i]; {
		case s.key == "":
			b.WriteString("[" + strconv.Itoa(s.index) + "]")
		case i < len(e.steps)-1:
			b.WriteString("." + s.key)
		default:
			b.WriteString(s.key)
		}
	}
	b.WriteString(e.hint)
	return b.String()
}

// within adds step to err's path when err is a strictError.
func within(err error, step strictStep) error {
	if e, ok := err.(*strictError); ok {
		e.steps = append(e.steps, step)
	}
	return err
}

// strictWalker walks a body's structure: it finds values' ends and reads
// keys, and leaves what is inside strings and numbers to encoding/json,
// which decodes the body only after the walk. Where the structure breaks
// it stops with errNotJSON; it never reads past the body and every step
// consumes a byte, so any input ends the walk.
type strictWalker struct {
	b []byte
	i int
}

func (w *strictWalker) space() {
	for w.i < len(w.b) {
		switch w.b[w.i] {
		case ' ', '\t', '\n', '\r':
			w.i++
		default:
			return
		}
	}
}

// peek is the byte at w.i, 0 past the end.
func (w *strictWalker) peek() byte {
	if w.i < len(w.b) {
		return w.b[w.i]
	}
	return 0
}

// value walks the value at w.i, meant for t (nil: anything, keys
// unchecked); depth objects and arrays enclose it.
func (w *strictWalker) value(t reflect.Type, depth int) error {
	w.space()
	switch w.peek() {
	case '{', '[':
		if depth == StrictJSONDepthMax {
			return &strictError{what: fmt.Sprintf("nested deeper than %d levels", StrictJSONDepthMax)}
		}
		if w.b[w.i] == '{' {
			return w.object(strictShapeOf(t), depth+1)
		}
		return w.array(strictShapeOf(t), depth+1)
	case '"':
		_, err := w.str()
		return err
	case 0:
		return errNotJSON
	}
	start := w.i // a number, true, false or null
	for w.i < len(w.b) && !scalarEnd(w.b[w.i]) {
		w.i++
	}
	if w.i == start {
		return errNotJSON
	}
	return nil
}

// scalarEnd reports whether c ends a number or a literal.
func scalarEnd(c byte) bool {
	switch c {
	case ',', ':', '[', ']', '{', '}', '"', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}

// str skips the string at w.i and returns its raw text, quotes included.
func (w *strictWalker) str() ([]byte, error) {
	start := w.i
	for {
		end := bytes.IndexByte(w.b[w.i+1:], '"')
		if end < 0 {
			return nil, errNotJSON
		}
		w.i += 1 + end
		escapes := 0 // backslashes just before the quote: odd escapes it
		for w.b[w.i-1-escapes] == '\\' {
			escapes++
		}
		if escapes%2 == 0 {
			w.i++
			return w.b[start:w.i], nil
		}
	}
}

func (w *strictWalker) array(s *strictShape, depth int) error {
	w.i++ // [
	if w.space(); w.peek() == ']' {
		w.i++
		return nil
	}
	for i := 0; ; i++ {
		if err := w.value(s.elemOf(reflect.Slice), depth); err != nil {
			return within(err, strictStep{index: i})
		}
		w.space()
		switch w.peek() {
		case ',':
			w.i++
		case ']':
			w.i++
			return nil
		default:
			return errNotJSON
		}
	}
}

func (w *strictWalker) object(s *strictShape, depth int) error {
	w.i++ // {
	if w.space(); w.peek() == '}' {
		w.i++
		return nil
	}
	var seen strictSeen
	for {
		if w.space(); w.peek() != '"' {
			return errNotJSON
		}
		raw, err := w.str()
		if err != nil {
			return err
		}
		key := strictKey(raw)
		if seen.add(key) {
			return &strictError{what: fmt.Sprintf("duplicate key %q", key)}
		}
		valueType := s.elemOf(reflect.Map)
		if s.kind == reflect.Struct {
			f, ok := s.fields[string(key)]
			if !ok {
				return s.unknown(string(key))
			}
			valueType = f
		}
		if w.space(); w.peek() != ':' {
			return errNotJSON
		}
		w.i++
		if err := w.value(valueType, depth); err != nil {
			return within(err, strictStep{key: string(key)})
		}
		w.space()
		switch w.peek() {
		case ',':
			w.i++
		case '}':
			w.i++
			return nil
		default:
			return errNotJSON
		}
	}
}

// strictKey is a key as encoding/json reads it from raw, its quoted text:
// the text itself unless it has escapes or non-ASCII bytes (invalid UTF-8
// is read as U+FFFD), which encoding/json unquotes.
func strictKey(raw []byte) []byte {
	for _, c := range raw {
		if c == '\\' || c >= 0x80 {
			var s string
			_ = json.Unmarshal(raw, &s) // if raw is no JSON string, neither is the body
			return []byte(s)
		}
	}
	return raw[1 : len(raw)-1]
}

// strictSeen is the keys of one object so far: compared one by one up
// to strictSeenLinear, then in a set, so the check stays linear in an
// object of many keys.
type strictSeen struct {
	list [strictSeenLinear][]byte
	n    int
	set  map[string]struct{}
}

// add records key and reports whether it was there already.
func (s *strictSeen) add(key []byte) bool {
	if s.set != nil {
		if _, dup := s.set[string(key)]; dup {
			return true
		}
		s.set[string(key)] = struct{}{}
		return false
	}
	for _, k := range s.list[:s.n] {
		if bytes.Equal(k, key) {
			return true
		}
	}
	if s.n < strictSeenLinear {
		s.list[s.n] = key
		s.n++
		return false
	}
	s.set = make(map[string]struct{}, 4*strictSeenLinear)
	for _, k := range s.list {
		s.set[string(k)] = struct{}{}
	}
	s.set[string(key)] = struct{}{}
	return false
}
