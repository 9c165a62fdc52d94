package gateway

import (
	"bytes"
	"encoding/json"
	"net/http"
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
