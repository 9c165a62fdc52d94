package gateway

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/capgate/capgate/api"
)

// errorMessage is the message of an error body.
func (r response) errorMessage() string {
	var e api.ErrorBody
	_ = json.Unmarshal(r.body, &e)
	return e.Error.Message
}

// expectRefusal checks status, code and that the message says each of
// says.
func expectRefusal(t *testing.T, r response, status int, code api.Code, says ...string) {
	t.Helper()
	expectError(t, r, status, code)
	for _, s := range says {
		if !strings.Contains(r.errorMessage(), s) {
			t.Errorf("%d %s does not say %q", r.status, r.body, s)
		}
	}
}

// TestQueryNumbersOutOfRangeRefused: a number beyond its parameter's
// range was saturated — offset=9223372036854775808 (or 23 digits) was
// read as 9223372036854775807 and the 416 reported that offset, not the
// one asked for; max_bytes and max_wait_ms past int64 were clamped. Each
// is 400 now, naming the parameter and its range; the largest number in
// range is still taken (the 416 names exactly it, and max_bytes /
// max_wait_ms at the top of theirs are clamped to the gateway's
// ceilings).
func TestQueryNumbersOutOfRangeRefused(t *testing.T) {
	h := newHarness(t, nil)
	want := h.produce(0, 3)
	tok, _ := h.mint(capClaims(0))
	offsetRange := []string{"offset", "earliest", "latest", "[0, 9223372036854775807]"}
	bytesRange := []string{"max_bytes", "[1, 2147483647]"}
	waitRange := []string{"max_wait_ms", "[0, 2147483647]"}
	cases := []struct {
		query string
		says  []string
	}{
		{"offset=9223372036854775808", offsetRange},
		{"offset=18446744073709551616", offsetRange},
		{"offset=99999999999999999999999", offsetRange},
		{"offset=-1", offsetRange},
		{"offset=0&max_bytes=2147483648", bytesRange},
		{"offset=0&max_bytes=99999999999999999999999", bytesRange},
		{"offset=0&max_bytes=0", bytesRange},
		{"offset=0&max_bytes=-1", bytesRange},
		{"offset=0&max_wait_ms=2147483648", waitRange},
		{"offset=0&max_wait_ms=99999999999", waitRange},
		{"offset=0&max_wait_ms=-5", waitRange},
	}
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			expectRefusal(t, h.get(tok, recordsPath(0, tc.query)), http.StatusBadRequest, api.CodeBadRequest, tc.says...)
		})
	}
	t.Run("the largest offset is the offset asked for", func(t *testing.T) {
		r := h.get(tok, recordsPath(0, "offset=9223372036854775807"))
		expectError(t, r, http.StatusRequestedRangeNotSatisfiable, api.CodeOffsetOutOfRange)
		if !bytes.Contains(r.body, []byte(`"offset":9223372036854775807`)) {
			t.Fatalf("416 does not name the offset asked for: %s", r.body)
		}
	})
	t.Run("the tops of the ranges are clamped to the ceilings", func(t *testing.T) {
		r := h.get(tok, recordsPath(0, "offset=0&max_bytes=2147483647&max_wait_ms=2147483647"))
		if r.status != http.StatusOK {
			t.Fatalf("%d %s", r.status, r.body)
		}
		checkRecords(t, r.fetch(t).Records, want, 0)
	})
}

// TestNumbersHaveOneSpelling: leading zeros were accepted —
// /partitions/0000000003/records fetched partition 3 — so one partition
// had many paths, which a path rule in a proxy, a cache or a log tells
// apart. A number in a path or a query has one spelling now (no sign,
// no leading zero); any other is 400 naming the rule. Produce too, and
// nothing is written.
func TestNumbersHaveOneSpelling(t *testing.T) {
	h := newHarness(t, nil)
	want := h.produce(3, 2)
	h.produce(0, 1)
	tok, _ := h.mint(capClaims(3))
	prod, _ := h.mint(withOps(capClaims(3), "produce"))
	zeroTok, _ := h.mint(capClaims(0))
	partitionRule := []string{"partition", "leading zeros", "[0, 2147483647]"}
	for _, path := range []string{
		"/v1/topics/orders/partitions/0000000003/records?offset=0",
		"/v1/topics/orders/partitions/03/records?offset=0",
		"/v1/topics/orders/partitions/+3/records?offset=0",
		"/v1/topics/orders/partitions/3.0/records?offset=0",
	} {
		t.Run("fetch "+path, func(t *testing.T) {
			expectRefusal(t, h.get(tok, path), http.StatusBadRequest, api.CodeBadRequest, partitionRule...)
		})
	}
	t.Run("fetch partition 00", func(t *testing.T) {
		expectRefusal(t, h.get(zeroTok, "/v1/topics/orders/partitions/00/records?offset=0"), http.StatusBadRequest, api.CodeBadRequest, partitionRule...)
	})
	t.Run("produce to partition 03", func(t *testing.T) {
		r := h.do(http.MethodPost, "/v1/topics/orders/partitions/03/records", prod, strings.NewReader(`{"records":[{"value":"eA=="}]}`), "Content-Type", "application/json")
		expectRefusal(t, r, http.StatusBadRequest, api.CodeBadRequest, partitionRule...)
	})
	for _, query := range []string{"offset=00", "offset=01", "offset=0&max_bytes=0100", "offset=0&max_wait_ms=00"} {
		t.Run("query "+query, func(t *testing.T) {
			expectRefusal(t, h.get(tok, recordsPath(3, query)), http.StatusBadRequest, api.CodeBadRequest, "leading zeros")
		})
	}
	t.Run("the one spelling is served, and nothing was written", func(t *testing.T) {
		f := h.get(tok, recordsPath(3, "offset=0&max_bytes=100000&max_wait_ms=0")).fetch(t)
		checkRecords(t, f.Records, want, 0)
		if f.NextOffset != 2 {
			t.Fatalf("next_offset %d: the produce to /partitions/03/ was written", f.NextOffset)
		}
		if f := h.get(zeroTok, recordsPath(0, "offset=0")).fetch(t); len(f.Records) != 1 {
			t.Fatalf("partition 0: %d records", len(f.Records))
		}
	})
}

// TestProduceBodyMustBePlainJSON: a produce with Content-Encoding: gzip
// was read as plain JSON (200: a plain body "encoded" as gzip was
// written; a really gzipped one was a confusing 400), and a wrong
// Content-Type was 400 where the coordinator answers 415. Both are 415
// unsupported_media_type now, naming what is accepted (Accept-Encoding:
// identity for a content coding), and nothing is written; identity,
// JSON with a charset and no Content-Type are still taken.
func TestProduceBodyMustBePlainJSON(t *testing.T) {
	h := newHarness(t, nil)
	prod, _ := h.mint(withOps(capClaims(1), "produce"))
	fetch, _ := h.mint(capClaims(1))
	body := `{"records":[{"value":"eA=="}]}`
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	_, _ = zw.Write([]byte(body))
	_ = zw.Close()
	post := func(body string, header ...string) response {
		return h.do(http.MethodPost, recordsURL(1), prod, strings.NewReader(body), header...)
	}
	refused := []struct {
		name   string
		body   string
		header []string
		says   []string
	}{
		{"gzip label on a plain body", body, []string{"Content-Type", "application/json", "Content-Encoding", "gzip"}, []string{`"gzip"`, "identity"}},
		{"gzipped body", zipped.String(), []string{"Content-Type", "application/json", "Content-Encoding", "gzip"}, []string{`"gzip"`, "identity"}},
		{"br", body, []string{"Content-Encoding", "br"}, []string{`"br"`, "identity"}},
		{"identity then gzip", body, []string{"Content-Encoding", "identity, gzip"}, []string{`"gzip"`}},
		{"text/plain", body, []string{"Content-Type", "text/plain"}, []string{"text/plain", "application/json"}},
		{"a form", body, []string{"Content-Type", "application/x-www-form-urlencoded"}, []string{"application/json", "curl -d sends that: add -H 'Content-Type: application/json'"}},
		{"JSON with a broken parameter", body, []string{"Content-Type", "application/json; charset"}, []string{"application/json"}},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			r := post(tc.body, tc.header...)
			expectRefusal(t, r, http.StatusUnsupportedMediaType, api.CodeUnsupportedMediaType, tc.says...)
			if strings.Contains(tc.name, "gzip") || tc.name == "br" {
				if got := r.header.Get("Accept-Encoding"); got != "identity" {
					t.Errorf("Accept-Encoding %q, want identity", got)
				}
			}
		})
	}
	t.Run("a second Content-Encoding line", func(t *testing.T) {
		raw := "POST " + recordsURL(1) + " HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer " + prod +
			"\r\nContent-Type: application/json\r\nContent-Encoding: identity\r\nContent-Encoding: gzip\r\nContent-Length: " +
			strconv.Itoa(len(body)) + "\r\n\r\n" + body
		expectRefusal(t, rawExchange(t, h.gw.Addr(), raw), http.StatusUnsupportedMediaType, api.CodeUnsupportedMediaType, `"gzip"`)
	})
	if f := h.get(fetch, recordsPath(1, "offset=0")).fetch(t); len(f.Records) != 0 {
		t.Fatalf("refused produces wrote %d records", len(f.Records))
	}
	for i, header := range [][]string{
		{"Content-Type", "application/json", "Content-Encoding", "identity"},
		{"Content-Type", "application/json; charset=utf-8"},
		{"Content-Type", "Application/JSON"},
		nil,
	} {
		r := post(body, header...)
		var pr api.ProduceResponse
		if err := json.Unmarshal(r.body, &pr); err != nil || r.status != http.StatusOK || pr.BaseOffset != int64(i) {
			t.Fatalf("produce with %q: %d %s", header, r.status, r.body)
		}
	}
}
