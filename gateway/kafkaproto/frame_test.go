package kafkaproto

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// seedFrames are valid request bodies (header + body, no size prefix) of
// every implemented API at its lowest and highest version, with default
// field values.
func seedFrames() [][]byte {
	var out [][]byte
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("seed"))
	for _, a := range apis {
		for _, v := range []int16{a.min, a.max} {
			req := kmsg.RequestForKey(a.key)
			req.SetVersion(v)
			frame := f.AppendRequest(nil, req, 42)
			out = append(out, frame[4:])
		}
	}
	return out
}

// FuzzParseRequest: the frame decoder never panics, accepts only
// implemented keys and versions, and what it accepts can be answered.
// Its seed corpus (every API at both ends of its range, and truncations
// of each) runs in every `go test`.
func FuzzParseRequest(f *testing.F) {
	for _, b := range seedFrames() {
		f.Add(b)
		f.Add(b[:len(b)/2])
		f.Add(b[:min(len(b), 9)])
	}
	f.Add([]byte{0x03, 0xe7, 0, 0, 0, 0, 0, 1, 0xff, 0xff}) // unknown key 999
	f.Fuzz(func(t *testing.T, body []byte) {
		h, req, err := parseRequest(body, DefaultMaxRequestPartitions)
		if err != nil {
			if req != nil {
				t.Fatalf("error %v with a request", err)
			}
			return
		}
		api, ok := lookupAPI(h.key)
		if !ok || h.version < api.min || h.version > api.max {
			t.Fatalf("accepted key %d version %d outside the table", h.key, h.version)
		}
		if req.Key() != h.key || req.GetVersion() != h.version {
			t.Fatalf("request %d v%d, header %d v%d", req.Key(), req.GetVersion(), h.key, h.version)
		}
		resp := req.ResponseKind()
		_ = appendResponse(nil, h.correlation, resp)
	})
}

func TestParseRequestRoundTrip(t *testing.T) {
	for _, b := range seedFrames() {
		h, req, err := parseRequest(b, DefaultMaxRequestPartitions)
		if err != nil {
			t.Fatalf("seed %d v%d: %v", h.key, h.version, err)
		}
		if h.clientID != "seed" || h.correlation != 42 {
			t.Fatalf("header %+v", h)
		}
		if req.Key() != h.key {
			t.Fatalf("key %d, header %d", req.Key(), h.key)
		}
	}
	if _, _, err := parseRequest([]byte{0, 18, 0, 99, 0, 0, 0, 1, 0xff, 0xff}, DefaultMaxRequestPartitions); !errors.Is(err, errBadVersion) {
		t.Fatalf("ApiVersions v99: %v, want errBadVersion", err)
	}
	if _, _, err := parseRequest([]byte{0, 1}, DefaultMaxRequestPartitions); !errors.Is(err, errTruncated) {
		t.Fatalf("two bytes: %v, want errTruncated", err)
	}
}

func TestSASLMessages(t *testing.T) {
	for _, c := range []struct {
		mech, msg, token string
		ok               bool
	}{
		{mechPlain, "\x00user\x00tok", "tok", true},
		{mechPlain, "user\x00user\x00tok", "tok", true},
		{mechPlain, "other\x00user\x00tok", "", false},
		{mechPlain, "\x00user\x00", "", false},
		{mechPlain, "\x00user\x00tok\x00x", "", false},
		{mechOAuthBearer, "n,,\x01auth=Bearer tok\x01\x01", "tok", true},
		{mechOAuthBearer, "n,a=me,\x01host=x\x01auth=bearer tok\x01\x01", "tok", true},
		{mechOAuthBearer, "n,,\x01auth=Bearer tok\x01", "", false},
		{mechOAuthBearer, "y,,\x01auth=Bearer tok\x01\x01", "", false},
		{mechOAuthBearer, "n,,\x01auth=Basic tok\x01\x01", "", false},
		{mechOAuthBearer, "n,,\x01auth=Bearer a\x01auth=Bearer b\x01\x01", "", false},
		{mechOAuthBearer, "n,,\x01\x01", "", false},
		{"", "\x00u\x00tok", "", false},
	} {
		token, err := bearerOf(c.mech, []byte(c.msg))
		if (err == nil) != c.ok || token != c.token {
			t.Errorf("%s %q: token %q err %v, want %q ok=%v", c.mech, c.msg, token, err, c.token, c.ok)
		}
	}
}
