package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// strictNested has what the table needs beyond the API's types: a map, a
// raw message, an interface, a type with its own UnmarshalJSON, embedded
// structs (by value and by pointer) and a skipped field.
type strictNested struct {
	Name    string                  `json:"name"`
	Labels  map[string]CommitOffset `json:"labels,omitempty"`
	Raw     json.RawMessage         `json:"raw,omitempty"`
	Any     any                     `json:"any,omitempty"`
	Err     *Error                  `json:"err,omitempty"`
	Skipped string                  `json:"-"`
	Deep    [][]CommitOffset        `json:"deep,omitempty"`
	strictEmbedded
	*StrictEmbeddedPtr
}

type strictEmbedded struct {
	Inner string `json:"inner,omitempty"`
	Name  string `json:"name"` // shadowed by strictNested.Name
}

// StrictEmbeddedPtr is exported: encoding/json cannot set an embedded
// pointer to an unexported struct.
type StrictEmbeddedPtr struct {
	Untagged int
}

// TestStrictJSON: what StrictJSON accepts and what it refuses, with the
// message (the key and where it is), on the API's own bodies and on a
// type of every kind the walk follows. The first rows are the red
// team's: encoding/json alone took each of them.
func TestStrictJSON(t *testing.T) {
	for _, c := range []struct {
		name string
		body string
		dst  func() any
		err  string // "" accepted; else the exact message
	}{
		{"case variants", `{"TOPICS":["demo"],"Session_Timeout_MS":300000}`, join, `unknown field "TOPICS" (did you mean "topics"?)`},
		{"duplicate key", `{"topics":["nosuch"],"topics":["demo"]}`, join, `duplicate key "topics"`},
		{"case variant later", `{"topics":["demo"],"Session_Timeout_MS":300000}`, join, `unknown field "Session_Timeout_MS" (did you mean "session_timeout_ms"?)`},
		{"duplicate through an escape", `{"topics":["a"],"top\u0069cs":["b"]}`, join, `duplicate key "topics"`},
		{"escaped exact name", `{"top\u0069cs":["demo"]}`, join, ""},
		{"unknown field", `{"topics":["demo"],"zzz":1}`, join, `unknown field "zzz"`},
		{"unicode case variant", `{"topıcs":["demo"]}`, join, `unknown field "topıcs"`},
		{"kelvin sign", "{\"\u212aey\":1}", func() any { return new(struct{ Key int }) }, "unknown field \"\u212aey\" (did you mean \"Key\"?)"},
		{"join", `{"client_id":"svc","topics":["demo"],"session_timeout_ms":10000,"assignor":"sticky"}`, join, ""},
		{"whitespace", " \t\r\n{ \"topics\" :\n[ \"demo\" , \"x\" ] } \n", join, ""},
		{"empty object", `{}`, join, ""},
		{"null", `null`, join, ""},
		{"duplicate in an array item", `{"offsets":[{"topic":"demo","partition":0,"offset":1,"capability":"c"},{"topic":"a","topic":"demo","partition":1,"offset":1,"capability":"c"}]}`, commit,
			`duplicate key "topic" in offsets[1]`},
		{"case variant in an array item", `{"offsets":[{"Topic":"demo","partition":0,"offset":1,"capability":"c"}]}`, commit,
			`unknown field "Topic" in offsets[0] (did you mean "topic"?)`},
		{"same key in two items", `{"offsets":[{"topic":"a","partition":0},{"topic":"b","partition":1}],"release":true}`, commit, ""},
		{"same key at two depths", `{"name":"x","labels":{"name":{"topic":"t"}}}`, nested, ""},
		{"duplicate map key", `{"labels":{"a":{},"a":{}}}`, nested, `duplicate key "a" in labels`},
		{"map key any case", `{"labels":{"A":{},"a":{}}}`, nested, ""},
		{"case variant in a map value", `{"labels":{"a":{"TOPIC":"t"}}}`, nested, `unknown field "TOPIC" in labels.a (did you mean "topic"?)`},
		{"nested arrays", `{"deep":[[],[{"topic":"t"},{"topic":"t","Offset":1}]]}`, nested, `unknown field "Offset" in deep[1][1] (did you mean "offset"?)`},
		{"raw message not descended", `{"raw":{"ANY":{"Thing":1}}}`, nested, ""},
		{"duplicate in a raw message", `{"raw":{"a":1,"a":2}}`, nested, `duplicate key "a" in raw`},
		{"interface not descended", `{"any":{"X":[{"y":1}]}}`, nested, ""},
		{"duplicate in an interface", `{"any":[{"y":1,"y":2}]}`, nested, `duplicate key "y" in any[0]`},
		{"own UnmarshalJSON not descended", `{"err":{"code":"bad_request","Extra":1}}`, nested, ""},
		{"duplicate in own UnmarshalJSON", `{"err":{"code":"a","code":"b"}}`, nested, `duplicate key "code" in err`},
		{"embedded field promoted", `{"name":"x","inner":"y","Untagged":1}`, nested, ""},
		{"embedded field case", `{"untagged":1}`, nested, `unknown field "untagged" (did you mean "Untagged"?)`},
		{"skipped field", `{"Skipped":"x"}`, nested, `unknown field "Skipped"`},
		{"pointer fields", `{"offset_from":1,"offset_to":null,"ops":["fetch"]}`, func() any { return new(AttenuateRequest) }, ""},
		{"pointer to pointer", `{"topics":["demo"]}`, func() any { p := new(JoinRequest); return &p }, ""},
		{"not JSON", `{"topics":`, join, "unexpected EOF"},
		{"not JSON, duplicate before", `{"a":1,"a":`, join, "unexpected EOF"},
		{"trailing value", `{} {}`, join, "trailing data after the JSON value"},
		{"trailing garbage", `{"topics":[]} x`, join, "trailing data after the JSON value"},
		{"trailing comma", `{"topics":[],}`, join, "invalid character '}' looking for beginning of object key string"},
		{"wrong type", `{"topics":"demo"}`, join, `field "topics": want an array, got a string`},
		{"wrong type, duplicate inside", `{"topics":{"a":1,"a":2}}`, join, `duplicate key "a" in topics`},
		{"too deep", strings.Repeat(`{"any":`, StrictJSONDepthMax) + "{}" + strings.Repeat("}", StrictJSONDepthMax), nested,
			fmt.Sprintf("nested deeper than %d levels in any%s", StrictJSONDepthMax, strings.Repeat(".any", StrictJSONDepthMax-1))},
		{"deep enough", strings.Repeat(`{"any":`, StrictJSONDepthMax-1) + "{}" + strings.Repeat("}", StrictJSONDepthMax-1), nested, ""},
	} {
		t.Run(c.name, func(t *testing.T) { strictCase(t, c.body, c.dst(), c.err) })
	}
}

// strictCase requires StrictJSON to accept body into dst (want "") or
// to refuse it with exactly want.
func strictCase(t *testing.T, body string, dst any, want string) {
	t.Helper()
	err := StrictJSON([]byte(body), dst)
	switch {
	case want == "" && err != nil:
		t.Fatalf("%s: refused: %v", body, err)
	case want != "" && (err == nil || err.Error() != want):
		t.Fatalf("%s: got %v, want %q", body, err, want)
	}
}

func join() any   { return new(JoinRequest) }
func commit() any { return new(CommitRequest) }
func nested() any { return new(strictNested) }

// TestStrictJSONDecodes: a body that passes decodes as encoding/json
// decodes it, and a refused one leaves dst alone.
func TestStrictJSONDecodes(t *testing.T) {
	var got JoinRequest
	if err := StrictJSON([]byte(`{"topics":["a","b"],"session_timeout_ms":7,"member_id":"m"}`), &got); err != nil {
		t.Fatal(err)
	}
	want := JoinRequest{Topics: []string{"a", "b"}, SessionTimeoutMs: 7, MemberID: "m"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	var refused JoinRequest
	if StrictJSON([]byte(`{"member_id":"m","topics":["a"],"topics":["b"]}`), &refused) == nil || !reflect.DeepEqual(refused, JoinRequest{}) {
		t.Fatalf("refused body decoded: %+v", refused)
	}
}

// TestStrictJSONFieldsAsEncodingJSON: the names the walk allows for a
// struct are exactly the keys encoding/json writes for it (the same
// field rules decide both: tags, "-", embedded structs, shadowing).
func TestStrictJSONFieldsAsEncodingJSON(t *testing.T) {
	for _, v := range []any{
		strictNested{Labels: map[string]CommitOffset{"a": {}}, Raw: json.RawMessage("1"), Any: 1, Err: &Error{Code: "x"},
			Deep: [][]CommitOffset{{}}, strictEmbedded: strictEmbedded{Inner: "i"}, StrictEmbeddedPtr: &StrictEmbeddedPtr{}},
		JoinRequest{MemberID: "m", RenewToken: "r", RenewCredential: "rc", InstanceID: "i", ClientID: "c", Topics: []string{"t"}, TopicPattern: "p", SessionTimeoutMs: 1, Assignor: "a"},
		CommitOffset{Metadata: "m"}, CommitRequest{Release: true},
		AttenuateRequest{Ops: []string{"fetch"}, OffsetFrom: new(int64), OffsetTo: new(int64), TTLMs: 1, MaxBytesPerSec: 1},
		QoSOverride{LogLevel: "debug", Monitor: "m", MaxBytesPerSec: 1},
	} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var written map[string]json.RawMessage
		if err := json.Unmarshal(b, &written); err != nil {
			t.Fatal(err)
		}
		shape := strictShapeOf(reflect.TypeOf(v))
		if len(shape.fields) != len(written) {
			t.Errorf("%T: walk allows %d names, encoding/json writes %d: %s", v, len(shape.fields), len(written), b)
		}
		for name := range written {
			if _, ok := shape.fields[name]; !ok {
				t.Errorf("%T: encoding/json writes %q, the walk refuses it", v, name)
			}
		}
	}
}

// TestStrictJSONAgainstTokens holds the walk to a naive one, the same
// rules over encoding/json's Decoder.Token, on seeded random bodies:
// keys exact, in other cases, escaped, repeated, in invalid UTF-8; values
// of every kind, nested; and broken copies of them. Both must accept and
// refuse alike, with the same message when the body is JSON, and decode
// alike.
func TestStrictJSONAgainstTokens(t *testing.T) {
	rounds := 20000
	if testing.Short() {
		rounds = 2000
	}
	r := rand.New(rand.NewPCG(1, 2))
	accepted, refusedStrict := 0, 0
	for i := range rounds {
		body := randomBody(r)
		if i%4 == 3 {
			body = breakBody(r, body)
		}
		for _, dst := range []func() any{join, commit, nested} {
			fast, naive := dst(), dst()
			errFast, errNaive := StrictJSON(body, fast), naiveStrictJSON(body, naive)
			if (errFast == nil) != (errNaive == nil) {
				t.Fatalf("%T %q: walk %v, tokens %v", fast, body, errFast, errNaive)
			}
			if errFast == nil {
				accepted++
				if !reflect.DeepEqual(fast, naive) {
					t.Fatalf("%T %q: decoded %+v, tokens %+v", fast, body, fast, naive)
				}
				continue
			}
			var se *strictError
			if errors.As(errNaive, &se) {
				refusedStrict++
			}
			if json.Valid(body) && errFast.Error() != errNaive.Error() {
				t.Fatalf("%T %q: walk %q, tokens %q", fast, body, errFast, errNaive)
			}
		}
	}
	t.Logf("%d bodies: %d decodes accepted, %d refused by the key rules", rounds, accepted, refusedStrict)
	if accepted < rounds/20 || refusedStrict < rounds/20 {
		t.Fatalf("the bodies miss a side: %d accepted, %d refused by the key rules", accepted, refusedStrict)
	}
}

// naiveStrictJSON is StrictJSON over Decoder.Token: slow (a token is an
// allocation, a set per object), obviously right.
func naiveStrictJSON(body []byte, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := naiveValue(dec, reflect.TypeOf(dst), 0); err != nil {
		var se *strictError
		if errors.As(err, &se) && !json.Valid(body) {
			return errors.New("not JSON")
		}
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("trailing data")
	}
	strict := json.NewDecoder(bytes.NewReader(body))
	strict.DisallowUnknownFields()
	err := strict.Decode(dst)
	if te, ok := err.(*json.UnmarshalTypeError); ok {
		return typeError(body, te) // its words: TestStrictJSONTypeErrors, TestStrictJSONTypeErrorsLocated
	}
	return err
}

func naiveValue(dec *json.Decoder, t reflect.Type, depth int) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	if depth == StrictJSONDepthMax {
		return &strictError{what: fmt.Sprintf("nested deeper than %d levels", StrictJSONDepthMax)}
	}
	shape := strictShapeOf(t)
	seen := map[string]bool{}
	for i := 0; dec.More(); i++ {
		if delim == '[' {
			if err := naiveValue(dec, shape.elemOf(reflect.Slice), depth+1); err != nil {
				return within(err, strictStep{index: i})
			}
			continue
		}
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		if err := naiveMember(dec, shape, seen, tok.(string), depth); err != nil {
			return err
		}
	}
	_, err = dec.Token()
	return err
}

// naiveMember checks an object's member key, after the keys seen, and
// walks its value.
func naiveMember(dec *json.Decoder, shape *strictShape, seen map[string]bool, key string, depth int) error {
	if seen[key] {
		return &strictError{what: fmt.Sprintf("duplicate key %q", key)}
	}
	seen[key] = true
	valueType := shape.elemOf(reflect.Map)
	if shape.kind == reflect.Struct {
		f, ok := shape.fields[key]
		if !ok {
			return shape.unknown(key)
		}
		valueType = f
	}
	if err := naiveValue(dec, valueType, depth+1); err != nil {
		return within(err, strictStep{key: key})
	}
	return nil
}

// randomBody is a JSON object for the test types, drawn from r: their
// names and variants of them as keys, often repeated.
func randomBody(r *rand.Rand) []byte {
	var b bytes.Buffer
	randomObject(r, &b, 0)
	return b.Bytes()
}

var randomKeys = []string{
	"topics", "topic", "offsets", "partition", "offset", "capability", "release", "member_id", "name", "labels",
	"raw", "any", "err", "deep", "inner", "Untagged", "code", "session_timeout_ms",
	"TOPICS", "Topic", "Offsets", "OFFSET", "Name", "untagged", "Session_Timeout_MS",
	`top\u0069cs`, `\u0074opic`, `na\u006De`, `x\"y`, `a\\b`, "\xff", "\xfe", `\ud800`, `\udc00`, "é", `\u00e9`, "ı", "K",
}

func randomObject(r *rand.Rand, b *bytes.Buffer, depth int) {
	b.WriteString(space(r) + "{")
	n := r.IntN(5)
	for i := range n {
		if i > 0 {
			b.WriteString(space(r) + ",")
		}
		fmt.Fprintf(b, `%s"%s"%s:`, space(r), randomKeys[r.IntN(len(randomKeys))], space(r))
		randomJSONValue(r, b, depth+1)
	}
	b.WriteString(space(r) + "}")
}

func randomJSONValue(r *rand.Rand, b *bytes.Buffer, depth int) {
	b.WriteString(space(r))
	switch k := r.IntN(9); {
	case k < 2 && depth < 6:
		randomObject(r, b, depth)
	case k < 4 && depth < 6:
		b.WriteString("[")
		for i := range r.IntN(4) {
			if i > 0 {
				b.WriteString(",")
			}
			randomJSONValue(r, b, depth+1)
		}
		b.WriteString(space(r) + "]")
	case k == 4:
		b.WriteString([]string{`"demo"`, `"a\"b"`, `"\\"`, `"x\\\"}"`, `""`, `"\u0041"`}[r.IntN(6)])
	case k == 5:
		b.WriteString([]string{"true", "false", "null"}[r.IntN(3)])
	default:
		b.WriteString([]string{"0", "1", "-5", "1.5e3", "9223372036854775807", "3000"}[r.IntN(6)])
	}
}

func space(r *rand.Rand) string {
	return []string{"", "", "", " ", "\n\t", "\r\n "}[r.IntN(6)]
}

// breakBody cuts, drops, doubles or replaces a byte of body.
func breakBody(r *rand.Rand, body []byte) []byte {
	if len(body) == 0 {
		return body
	}
	i := r.IntN(len(body))
	out := append([]byte(nil), body[:i]...)
	switch r.IntN(4) {
	case 0:
		return out
	case 1:
		return append(out, body[i+1:]...)
	case 2:
		return append(append(out, body[i], body[i]), body[i+1:]...)
	}
	return append(append(out, `{}[]",:\ x1`[r.IntN(11)]), body[i+1:]...)
}

// FuzzStrictJSON: no input panics the walk or makes it read past the
// body, and the walk agrees with the naive one.
func FuzzStrictJSON(f *testing.F) {
	for _, s := range []string{`{"topics":["a"]}`, `{"a":1,"a":2}`, `{"offsets":[{"Topic":1}]}`, `"\\"`, `[`, `{"a":"\\\""}`,
		`{"topics":["a",1]}`, `{"offsets":[{"partition":"x"}]}`, `{"labels":{"a":{"offset":true}}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, dst := range []func() any{join, commit, nested} {
			errFast, errNaive := StrictJSON(body, dst()), naiveStrictJSON(body, dst())
			if (errFast == nil) != (errNaive == nil) {
				t.Fatalf("%q: walk %v, tokens %v", body, errFast, errNaive)
			}
		}
	})
}
