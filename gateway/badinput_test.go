package gateway

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
)

// TestBadInput sends malformed and hostile requests over raw sockets and
// checks the exact status and error code of each, then that the gateway
// still serves a correct fetch.
func TestBadInput(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.ReadTimeout = 500 * time.Millisecond
		c.MaxBodyBytes = 64 << 10
	})
	want := h.produce(0, 3)
	tok, _ := h.mint(capClaims(0))
	produceTok, _ := h.mint(withOps(capClaims(0), "produce"))
	auth := "Authorization: Bearer " + tok + "\r\n"
	get := func(target string) string {
		return "GET " + target + " HTTP/1.1\r\nHost: gw\r\n" + auth + "\r\n"
	}
	post := func(target, extra, body string) string {
		return "POST " + target + " HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer " + produceTok + "\r\nContent-Type: application/json\r\n" + extra +
			"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	}
	cases := []struct {
		name   string
		raw    string
		status int
		code   api.Code
		allow  string
	}{
		{"header of 100k dots", "GET /healthz HTTP/1.1\r\nHost: gw\r\nX-Dots: " + strings.Repeat(".", 100_000) + "\r\n\r\n", 431, api.CodeHeadersTooLarge, ""},
		{"partition -1", get("/v1/topics/orders/partitions/-1/records?offset=0"), 400, api.CodeBadRequest, ""},
		{"partition 2^31", get("/v1/topics/orders/partitions/2147483648/records?offset=0"), 400, api.CodeBadRequest, ""},
		{"partition abc", get("/v1/topics/orders/partitions/abc/records?offset=0"), 400, api.CodeBadRequest, ""},
		{"partition +1", get("/v1/topics/orders/partitions/+1/records?offset=0"), 400, api.CodeBadRequest, ""},
		{"negative offset", get(recordsPath(0, "offset=-1")), 400, api.CodeBadRequest, ""},
		{"offset missing", get(recordsPath(0, "max_bytes=10")), 400, api.CodeBadRequest, ""},
		{"offset not a number", get(recordsPath(0, "offset=1e3")), 400, api.CodeBadRequest, ""},
		{"empty offset", get(recordsPath(0, "offset=")), 400, api.CodeBadRequest, ""},
		{"max_bytes zero", get(recordsPath(0, "offset=0&max_bytes=0")), 400, api.CodeBadRequest, ""},
		{"max_wait_ms negative", get(recordsPath(0, "offset=0&max_wait_ms=-5")), 400, api.CodeBadRequest, ""},
		{"duplicate offset", get(recordsPath(0, "offset=0&offset=1")), 400, api.CodeBadRequest, ""},
		{"unknown query parameter", get(recordsPath(0, "offset=0&partition=1")), 400, api.CodeBadRequest, ""},
		{"invalid topic name", get("/v1/topics/bad$topic/partitions/0/records?offset=0"), 400, api.CodeBadRequest, ""},
		{"extra path segment", get("/v1/topics/orders/partitions/0/records/x?offset=0"), 404, api.CodeNotFound, ""},
		{"unknown route", get("/v2/anything"), 404, api.CodeNotFound, ""},
		{"wrong method on records", "PUT " + recordsURL(0) + " HTTP/1.1\r\nHost: gw\r\nContent-Length: 0\r\n\r\n", 405, api.CodeMethodNotAllowed, "GET, POST"},
		{"wrong method on healthz", "DELETE /healthz HTTP/1.1\r\nHost: gw\r\n\r\n", 405, api.CodeMethodNotAllowed, "GET, HEAD"},
		{"oversize body", post(recordsURL(0), "", `{"records":[{"value":"`+strings.Repeat("A", 70_000)+`"}]}`), 413, api.CodeBodyTooLarge, ""},
		{"Content-Length with Transfer-Encoding", "POST " + recordsURL(0) + " HTTP/1.1\r\nHost: gw\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, api.CodeBadRequest, ""},
		{"Transfer-Encoding with Content-Length", "POST " + recordsURL(0) + " HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\n", 400, api.CodeBadRequest, ""},
		{"two Authorization headers, a valid one second", "GET " + recordsPath(0, "offset=0") + " HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer x\r\n" + auth + "\r\n", 400, api.CodeBadRequest, ""},
		{"two Authorization headers, a valid one first", "GET " + recordsPath(0, "offset=0") + " HTTP/1.1\r\nHost: gw\r\n" + auth + "authorization: Bearer x\r\n\r\n", 400, api.CodeBadRequest, ""},
		{"produce with a query", post(recordsURL(0)+"?offset=1", "", `{"records":[{"value":"eA=="}]}`), 400, api.CodeBadRequest, ""},
		{"produce unknown field", post(recordsURL(0), "", `{"records":[{"value":"eA==","partition":3}]}`), 400, api.CodeBadRequest, ""},
		{"produce no records", post(recordsURL(0), "", `{"records":[]}`), 400, api.CodeBadRequest, ""},
		{"produce trailing data", post(recordsURL(0), "", `{"records":[{"value":"eA=="}]} {}`), 400, api.CodeBadRequest, ""},
		{"produce bad base64", post(recordsURL(0), "", `{"records":[{"value":"!!"}]}`), 400, api.CodeBadRequest, ""},
		{"produce as text/plain", strings.Replace(post(recordsURL(0), "", `{"records":[{"value":"eA=="}]}`), "application/json", "text/plain", 1), 415, api.CodeUnsupportedMediaType, ""},
		{"produce gzip", post(recordsURL(0), "Content-Encoding: gzip\r\n", `{"records":[{"value":"eA=="}]}`), 415, api.CodeUnsupportedMediaType, ""},
		{"partition 03", get("/v1/topics/orders/partitions/03/records?offset=0"), 400, api.CodeBadRequest, ""},
		{"offset past int64", get(recordsPath(0, "offset=9223372036854775808")), 400, api.CodeBadRequest, ""},
		{"max_bytes past int32", get(recordsPath(0, "offset=0&max_bytes=2147483648")), 400, api.CodeBadRequest, ""},
		{"max_wait_ms past int32", get(recordsPath(0, "offset=0&max_wait_ms=2147483648")), 400, api.CodeBadRequest, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := rawExchange(t, h.gw.Addr(), tc.raw)
			expectError(t, r, tc.status, tc.code)
			if got := r.header.Get("Allow"); got != tc.allow {
				t.Fatalf("Allow %q, want %q", got, tc.allow)
			}
		})
	}
	t.Run("the largest max_bytes and max_wait_ms are clamped", func(t *testing.T) {
		r := h.get(tok, recordsPath(0, "offset=0&max_bytes=2147483647&max_wait_ms=2147483647"))
		if r.status != http.StatusOK {
			t.Fatalf("%d %s", r.status, r.body)
		}
		checkRecords(t, r.fetch(t).Records, want, 0)
	})
	t.Run("slow headers are cut off", func(t *testing.T) { slowHeaders(t, h.gw.Addr(), 500*time.Millisecond) })
	t.Run("still serving", func(t *testing.T) {
		checkRecords(t, h.get(tok, recordsPath(0, "offset=0")).fetch(t).Records, want, 0)
	})
}

// slowHeaders sends half a request and stalls: the gateway must close the
// connection within about its read timeout.
func slowHeaders(t *testing.T, addr string, readTimeout time.Duration) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: gw\r\nX-Slow: "); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * readTimeout))
	_, _ = io.Copy(io.Discard, conn) // returns at EOF: the server closed
	if elapsed := time.Since(start); elapsed >= 10*readTimeout {
		t.Fatalf("connection still open after %v (read_timeout %v)", elapsed, readTimeout)
	}
}

// TestUnknownRouteSaysWhatIsServed: a 404 names the path asked for and
// the gateway's routes — a base URL with a path (--gateways
// http://gw:8080/v1) or a coordinator's route sent to a gateway was
// answered only "no such route".
func TestUnknownRouteSaysWhatIsServed(t *testing.T) {
	h := newHarness(t, nil)
	r := h.get("", "/v1/v1/topics/orders/partitions/0/records?offset=0&secret=s3cr3t")
	expectError(t, r, http.StatusNotFound, api.CodeNotFound)
	for _, want := range []string{"no such route", "/v1/v1/topics/orders/partitions/0/records", "/v1/topics/{topic}/partitions/{partition}/records", "base URL"} {
		if !strings.Contains(string(r.body), want) {
			t.Errorf("404 %s does not say %q", r.body, want)
		}
	}
	if strings.Contains(string(r.body), "s3cr3t") {
		t.Errorf("404 echoes the query: %s", r.body)
	}
	// A topic's details (GET /v1/topics/T, rpk topic describe's habit)
	// are at the coordinator's admin API (newuser5).
	r = h.get("", "/v1/topics/orders")
	if expectError(t, r, http.StatusNotFound, api.CodeNotFound); !strings.Contains(string(r.body), "GET /v1/admin/topics/{topic}") {
		t.Errorf("404 of /v1/topics/orders does not point at the coordinator's topic describe: %s", r.body)
	}
	r = h.get("", "/"+strings.Repeat("a", 4000))
	if expectError(t, r, http.StatusNotFound, api.CodeNotFound); len(r.body) > 1024 {
		t.Errorf("404 of a 4000-byte path is %d bytes", len(r.body))
	}
}

// TestMissingOffsetSaysWhatToSend: a fetch without offset (a new user's
// first curl) is told the forms offset takes, not only that it is
// required.
func TestMissingOffsetSaysWhatToSend(t *testing.T) {
	h := newHarness(t, nil)
	tok, _ := h.mint(capClaims(0))
	r := h.get(tok, recordsURL(0))
	expectError(t, r, http.StatusBadRequest, api.CodeBadRequest)
	for _, want := range []string{"offset=", "earliest", "latest"} {
		if !strings.Contains(string(r.body), want) {
			t.Errorf("%s does not say %q", r.body, want)
		}
	}
}
