package coordinator_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/internal/crlf/crlftest"
)

// TestMalformedHeadsAnsweredAtOnce: a request head the coordinator
// cannot read — on its API, its console, its health routes — is answered
// at once, 400 bad_request (431 when too large) with the JSON error body,
// then the connection closed; never held until read_timeout (a minute
// here). Heads whose lines end in a bare LF got no answer at all: fasthttp
// waits for a CRLFCRLF that never comes. The bare-LF smuggling shapes
// (Content-Length with Transfer-Encoding carrying a second request, two
// Authorization headers) are refused too, and the smuggled admin key
// rotation never runs.
func TestMalformedHeadsAnsweredAtOnce(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	e.cfg.ReadTimeout = time.Minute
	h := e.start(t)
	jwks := func() string {
		status, body, _ := h.do(t, "GET", "/.well-known/jwks.json", "", nil)
		if status != http.StatusOK {
			t.Fatalf("jwks: %d %s", status, body)
		}
		return string(body)
	}
	keysBefore := jwks()
	admin := "Authorization: Bearer " + e.adminToken + "\r\n"
	rotate := "POST /v1/admin/keys/rotate HTTP/1.1\r\nHost: c\r\n" + admin + "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
	chunkedThenRotate := "0\r\n\r\n" + rotate
	lf := func(s string) string { return strings.ReplaceAll(s, "\r\n", "\n") }
	bad := func(name, raw string) crlftest.Case {
		return crlftest.Case{Name: name, Raw: raw, Status: http.StatusBadRequest, Code: api.CodeBadRequest}
	}
	cases := []crlftest.Case{
		bad("bare LF everywhere", "GET /healthz HTTP/1.1\nHost: c\n\n"),
		bad("bare LF on the console", "GET /console/ HTTP/1.1\nHost: c\n\n"),
		bad("bare LF console login", lf("POST /console/login HTTP/1.1\r\nHost: c\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 7\r\n\r\n")+"token=x"),
		bad("bare LF after the request line", "GET /readyz HTTP/1.1\nHost: c\r\n\r\n"),
		bad("bare LF blank line, a CRLF request pipelined after", "GET /healthz HTTP/1.1\r\nHost: c\r\n\nGET /healthz HTTP/1.1\r\nHost: c\r\n\r\n"),
		bad("bare LF admin call", lf("GET /v1/admin/groups HTTP/1.1\r\nHost: c\r\n"+admin+"\r\n")),
		bad("bare LF Content-Length with Transfer-Encoding, smuggling a key rotation",
			lf("POST /v1/admin/keys/rotate HTTP/1.1\r\nHost: c\r\n"+admin+"Content-Type: application/json\r\nContent-Length: "+strconv.Itoa(len(chunkedThenRotate))+
				"\r\nTransfer-Encoding: chunked\r\n\r\n")+chunkedThenRotate),
		bad("bare LF two Authorization headers", lf("GET /v1/admin/groups HTTP/1.1\r\nHost: c\r\nAuthorization: Bearer x\r\n"+admin+"\r\n")),
		bad("TLS handshake on the plain port", "\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03"),
		bad("NUL in a header value", "GET /healthz HTTP/1.1\r\nHost: c\r\nX-A: a\x00b\r\n\r\n"),
		bad("NUL on the console", "GET /console/\x00 HTTP/1.1\r\nHost: c\r\n\r\n"),
		bad("header without a colon", "GET /v1/admin/groups HTTP/1.1\r\nHost: c\r\nNoColon\r\n\r\n"),
		bad("obs-fold continuation on the console", "GET /console/ HTTP/1.1\r\nHost: c\r\nX-A: a\r\n b\r\n\r\n"),
		bad("bare LF obs-fold continuation", "GET /healthz HTTP/1.1\nHost: c\nX-A: a\n b\n\n"),
		bad("lone CR in a value", "GET /console/ HTTP/1.1\r\nHost: c\r\nX-A: a\rb\r\n\r\n"),
		{Name: "header over max_header_bytes", Raw: "GET /console/ HTTP/1.1\r\nHost: c\r\nX-A: " + strings.Repeat("a", 100_000) + "\r\n\r\n", Status: 431, Code: api.CodeHeadersTooLarge},
	}
	crlftest.ExpectOneAnswerEach(t, h.c.Addr().String(), cases, 10*time.Second)
	if jwks() != keysBefore {
		t.Fatal("the signing keys changed: a smuggled key rotation ran")
	}
}
