package api

import (
	"encoding"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
)

// strictValueTextMax bounds how much of a refused number or key a type
// error echoes.
const strictValueTextMax = 40

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// typeError words encoding/json's refusal of a value of the wrong JSON
// type as the walk's refusals read, for the body's author rather than
// for Go: `field "resync": want a boolean (true or false), got a number`,
// `element 0 in offsets: want an object, got a string`. Where the value
// is comes from e.Offset, located in body (so a path has its array
// indices and map keys); when the value there is not the one e describes
// (an error a type's own UnmarshalJSON made, its offset its own), from
// e.Field's names.
func typeError(body []byte, e *json.UnmarshalTypeError) error {
	kind, text, _ := strings.Cut(e.Value, " ")
	at := int(e.Offset) - 1
	steps, start, end, ok := locateAt(body, at)
	if ok && kind == "number" && text != "" && body[start] == '{' && at > start && mapKeyAt(body, at) == text {
		// A map key that is no number of the map's key type: the
		// located value is the map.
		return &strictError{what: fmt.Sprintf("key %.*q", strictValueTextMax, text), steps: steps,
			hint: ": want " + jsonWant(e.Type, true) + " as the key"}
	}
	if !ok || !locatedIs(body[start:end], at-start, kind, text) || !strictPathMatches(steps, e.Field) {
		steps = fieldSteps(e.Field)
	}
	se := &strictError{what: "the body", hint: ": want " + jsonWant(e.Type, text != "") + ", got " + jsonGot(kind, text)}
	if len(steps) > 0 {
		switch last := steps[0]; {
		case last.key != "":
			se.what = fmt.Sprintf("field %q", last.key)
		default:
			se.what = fmt.Sprintf("element %d", last.index)
		}
		se.steps = steps[1:]
	}
	return se
}

// locatedIs reports whether value, located from an error's offset (at
// within it), is the value encoding/json described as kind and text: a
// container's offset is just past its opening bracket, a literal's just
// past its end.
func locatedIs(value []byte, at int, kind, text string) bool {
	switch kind {
	case "object":
		return value[0] == '{' && at == 0
	case "array":
		return value[0] == '[' && at == 0
	case "string":
		return value[0] == '"' && at == len(value)-1
	case "bool":
		return (value[0] == 't' || value[0] == 'f') && at == len(value)-1
	case "number":
		return (value[0] == '-' || '0' <= value[0] && value[0] <= '9') && at == len(value)-1 &&
			(text == "" || string(value) == text)
	}
	return false
}

// mapKeyAt is the key whose opening quote is at body[at], "" when none
// is there.
func mapKeyAt(body []byte, at int) string {
	if body[at] != '"' {
		return ""
	}
	w := strictWalker{b: body, i: at}
	raw, err := w.str()
	if err != nil {
		return ""
	}
	return string(strictKey(raw))
}

// strictPathMatches reports whether steps (innermost first), located
// from an offset, lead through the field encoding/json names (its path,
// outermost first, where the Go names of embedded structs come between
// json names and map keys are left out): its last name is a key of
// steps.
func strictPathMatches(steps []strictStep, field string) bool {
	if field == "" {
		return true
	}
	last := field[strings.LastIndexByte(field, '.')+1:]
	for _, s := range steps {
		if s.key == last {
			return true
		}
	}
	return false
}

// jsonWant names the JSON a value of t is read from; ranged adds an
// integer's range (the value was a number out of it, or not whole).
func jsonWant(t reflect.Type, ranged bool) string {
	for t.Kind() == reflect.Pointer && !t.Implements(textUnmarshaler) {
		t = t.Elem()
	}
	if t.Implements(textUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
		return "a string"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean (true or false)"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if ranged {
			bits := t.Bits()
			return fmt.Sprintf("an integer from %d to %d", int64(-1)<<(bits-1), int64(1)<<(bits-1)-1)
		}
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if ranged {
			return fmt.Sprintf("an integer from 0 to %d", uint64(math.MaxUint64)>>(64-t.Bits()))
		}
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a string (base64)"
		}
		return "an array"
	case reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return "another type"
}

// jsonGot names what the body had, from encoding/json's description
// ("bool", "number", "number 1.5", "string", "array", "object").
func jsonGot(kind, text string) string {
	switch kind {
	case "bool":
		return "a boolean"
	case "number":
		if text == "" {
			return "a number"
		}
		if len(text) > strictValueTextMax {
			text = text[:strictValueTextMax] + "…"
		}
		return "the number " + text
	case "string":
		return "a string"
	case "array":
		return "an array"
	case "object":
		return "an object"
	}
	return fmt.Sprintf("%.*q", strictValueTextMax, kind)
}

// locateAt is the path (innermost step first) to the innermost value of
// body holding byte at, and where that value starts; ok is false when
// at is outside the body's value. body is valid JSON (the walk passed
// it), nested at most StrictJSONDepthMax deep.
func locateAt(body []byte, at int) (steps []strictStep, start, end int, ok bool) {
	if at < 0 || at >= len(body) {
		return nil, 0, 0, false
	}
	w := strictWalker{b: body}
	return w.locate(at)
}

// locate walks the value at w.i; when at is inside it, it returns the
// path from it down to the innermost value holding at and where that
// value starts and ends.
func (w *strictWalker) locate(at int) ([]strictStep, int, int, bool) {
	w.space()
	start := w.i
	switch w.peek() {
	case '{':
		w.i++
		for w.space(); w.peek() == '"'; w.space() {
			raw, err := w.str()
			if err != nil {
				return nil, 0, 0, false
			}
			w.space()
			w.i++ // :
			if steps, start, end, in := w.locate(at); in {
				return append(steps, strictStep{key: string(strictKey(raw))}), start, end, true
			}
			if w.space(); w.peek() == ',' {
				w.i++
			}
		}
		w.i++ // }
	case '[':
		w.i++
		for i := 0; ; i++ {
			if w.space(); w.peek() == ']' || w.peek() == 0 {
				break
			}
			if steps, start, end, in := w.locate(at); in {
				return append(steps, strictStep{index: i}), start, end, true
			}
			if w.space(); w.peek() == ',' {
				w.i++
			}
		}
		w.i++ // ]
	case '"':
		if _, err := w.str(); err != nil {
			return nil, 0, 0, false
		}
	case 0:
		return nil, 0, 0, false
	default:
		for w.i < len(w.b) && !scalarEnd(w.b[w.i]) {
			w.i++
		}
	}
	return nil, start, w.i, start <= at && at < w.i
}

// fieldSteps is encoding/json's path as steps, innermost first.
func fieldSteps(field string) []strictStep {
	if field == "" {
		return nil
	}
	names := strings.Split(field, ".")
	steps := make([]strictStep, 0, len(names))
	for i := len(names) - 1; i >= 0; i-- {
		steps = append(steps, strictStep{key: names[i]})
	}
	return steps
}
