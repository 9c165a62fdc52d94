package api

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// strictTyped has a field of each JSON type a type error can want, and
// a map with integer keys.
type strictTyped struct {
	Flag   bool             `json:"flag"`
	Small  int8             `json:"small"`
	Count  uint16           `json:"count"`
	Ratio  float64          `json:"ratio"`
	Bytes  []byte           `json:"bytes"`
	Fixed  [2]int           `json:"fixed"`
	ByID   map[int]string   `json:"by_id"`
	Named  map[string]int32 `json:"named"`
	Own    *strictOwn       `json:"own"`
	Nested *strictNested    `json:"nested"`
}

// strictOwn decodes itself and hands back encoding/json's error of its
// own bytes: the error's offset is not the body's.
type strictOwn struct{ N int }

func (o *strictOwn) UnmarshalJSON(b []byte) error {
	var v struct {
		N int `json:"n"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	o.N = v.N
	return nil
}

// TestStrictJSONTypeErrors: a value of the wrong JSON type is refused in
// the words of the walk's refusals — the field, where it is (array
// indices and map keys included), the JSON type wanted and the one
// given — never encoding/json's Go wording ("cannot unmarshal number
// into Go struct field .resync of type bool"). The first row is the red
// team's heartbeat.
func TestStrictJSONTypeErrors(t *testing.T) {
	heartbeat := func() any { return new(HeartbeatRequest) }
	typed := func() any { return new(strictTyped) }
	for _, c := range []struct {
		name string
		body string
		dst  func() any
		err  string
	}{
		{"number for a boolean", `{"resync":1}`, heartbeat, `field "resync": want a boolean (true or false), got a number`},
		{"string for a boolean", `{"wait_ms":5,"resync":"true"}`, heartbeat, `field "resync": want a boolean (true or false), got a string`},
		{"string for an integer", `{"wait_ms":"5"}`, heartbeat, `field "wait_ms": want an integer, got a string`},
		{"fraction for an integer", `{"wait_ms":1.5}`, heartbeat,
			`field "wait_ms": want an integer from -9223372036854775808 to 9223372036854775807, got the number 1.5`},
		{"boolean for an integer", `{"wait_ms":true}`, heartbeat, `field "wait_ms": want an integer, got a boolean`},
		{"object for an integer", `{"wait_ms":{}}`, heartbeat, `field "wait_ms": want an integer, got an object`},
		{"array for a boolean", `{"resync":[true]}`, heartbeat, `field "resync": want a boolean (true or false), got an array`},
		{"array for the body", `[{"resync":true}]`, heartbeat, `the body: want an object, got an array`},
		{"string for the body", `"resync"`, heartbeat, `the body: want an object, got a string`},
		{"string for an array", `{"topics":"demo"}`, join, `field "topics": want an array, got a string`},
		{"number in an array", `{"topics":["demo",7]}`, join, `element 1 in topics: want a string, got a number`},
		{"nested in an array item", `{"offsets":[{"topic":"t","partition":0},{"topic":"t","partition":"1"}]}`, commit,
			`field "partition" in offsets[1]: want an integer, got a string`},
		{"out of an int32", `{"offsets":[{"partition":2147483648}]}`, commit,
			`field "partition" in offsets[0]: want an integer from -2147483648 to 2147483647, got the number 2147483648`},
		{"item not an object", `{"offsets":["demo/0"]}`, commit, `element 0 in offsets: want an object, got a string`},
		{"small int", `{"small":128}`, typed, `field "small": want an integer from -128 to 127, got the number 128`},
		{"negative for unsigned", `{"count":-1}`, typed, `field "count": want an integer from 0 to 65535, got the number -1`},
		{"string for a float", `{"ratio":"0.5"}`, typed, `field "ratio": want a number, got a string`},
		{"number for bytes", `{"bytes":5}`, typed, `field "bytes": want a string (base64), got a number`},
		{"object for a fixed array", `{"fixed":{}}`, typed, `field "fixed": want an array, got an object`},
		{"map key not an integer", `{"by_id":{"1":"a","x":"b"}}`, typed,
			`key "x" in by_id: want an integer from -9223372036854775808 to 9223372036854775807 as the key`},
		{"map value", `{"named":{"a":1,"b":false}}`, typed, `field "b" in named: want an integer, got a boolean`},
		{"map value in a map value", `{"nested":{"labels":{"a":{"offset":"1"}}}}`, typed,
			`field "offset" in nested.labels.a: want an integer, got a string`},
		{"nested arrays", `{"nested":{"deep":[[],[{"partition":0},{"partition":[]}]]}}`, typed,
			`field "partition" in nested.deep[1][1]: want an integer, got an array`},
		{"embedded field", `{"nested":{"inner":3}}`, typed, `field "inner" in nested: want a string, got a number`},
		{"embedded pointer field", `{"nested":{"Untagged":"3"}}`, typed, `field "Untagged" in nested: want an integer, got a string`},
		// strictOwn's error carries its own offset (in `{"n":"x"}`; in
		// this body it falls on own's opening brace, no string): the
		// path is encoding/json's.
		{"own UnmarshalJSON", `{"own":{"n":"x"}}`, typed, `field "n" in own: want an integer, got a string`},
		{"long number cut", `{"small":` + strings.Repeat("9", 100) + `}`, typed,
			`field "small": want an integer from -128 to 127, got the number ` + strings.Repeat("9", strictValueTextMax) + `…`},
		{"null is no type error", `{"resync":null,"wait_ms":null}`, heartbeat, ""},
		{"first error wins", `{"resync":1,"wait_ms":"x"}`, heartbeat, `field "resync": want a boolean (true or false), got a number`},
		{"duplicate before type", `{"resync":1,"resync":true}`, heartbeat, `duplicate key "resync"`},
		{"not JSON before type", `{"resync":1,`, heartbeat, "unexpected EOF"},
	} {
		t.Run(c.name, func(t *testing.T) { strictCase(t, c.body, c.dst(), c.err) })
	}
}

// TestStrictJSONLocateAnyOffset: locating a value from any offset, in
// any body, inside it or not, ends (no panic, no loop), and an offset on
// a value's last byte finds that value.
func TestStrictJSONLocateAnyOffset(t *testing.T) {
	for _, body := range []string{`{"a":[1,{"b":"x\"y"},[]],"c":{"":true}}`, `[ 1 , "2" , [ [ ] ] ]`, `"s"`, `7`, `{}`, `[]`} {
		for at := -2; at < len(body)+2; at++ {
			steps, start, end, ok := locateAt([]byte(body), at)
			if ok && (start > at || at >= end || end > len(body)) {
				t.Errorf("%s at %d: located %v [%d, %d)", body, at, steps, start, end)
			}
		}
	}
	body := []byte(`{"a":[1,{"b":"x\"y"}]}`)
	steps, start, end, ok := locateAt(body, strings.Index(string(body), `y"`)+1)
	if err := (&strictError{what: "v", steps: steps}).Error(); !ok || string(body[start:end]) != `"x\"y"` || err != "v in a[1].b" {
		t.Fatalf("located %q at %s (%v)", body[start:end], err, ok)
	}
}

// TestStrictJSONTypeErrorsLocated: on seeded random bodies (those of
// TestStrictJSONAgainstTokens), every type error encoding/json finds in
// a body the walk passed is located from its offset — the value there
// is the one the error describes and the path ends in its field — so no
// message falls back to encoding/json's path, which has no array
// indices; and no message is Go's.
func TestStrictJSONTypeErrorsLocated(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	typeErrors := 0
	for range 20000 {
		body := randomBody(r)
		for _, dst := range []func() any{join, commit, nested} {
			walked := strictWalker{b: body}
			if walked.value(reflect.TypeOf(dst()), 0) != nil {
				continue
			}
			dec := json.NewDecoder(bytes.NewReader(body))
			dec.DisallowUnknownFields()
			te, ok := dec.Decode(dst()).(*json.UnmarshalTypeError)
			if !ok || strings.HasPrefix(te.Field, "err") { // *Error decodes itself: its offsets are its own
				continue
			}
			typeErrors++
			kind, text, _ := strings.Cut(te.Value, " ")
			at := int(te.Offset) - 1
			steps, start, end, ok := locateAt(body, at)
			if !ok || !locatedIs(body[start:end], at-start, kind, text) || !strictPathMatches(steps, te.Field) {
				t.Fatalf("%q: %v not located (%v %q at %d)", body, te, ok, body[start:end], at)
			}
			if msg := StrictJSON(body, dst()).Error(); strings.Contains(msg, "Go ") || strings.Contains(msg, "json:") {
				t.Fatalf("%q: %s", body, msg)
			}
		}
	}
	t.Logf("%d type errors located", typeErrors)
	if typeErrors < 1000 {
		t.Fatalf("only %d type errors among the bodies", typeErrors)
	}
}
