package gateway

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/internal/crlf/crlftest"
)

// TestMalformedHeadsAnsweredAtOnce: a request head the gateway cannot
// read is answered at once — 400 bad_request (431 when too large) with
// the JSON error body, then the connection closed — never held until
// read_timeout (a minute here). Heads whose lines end in a bare LF got no
// answer at all: fasthttp waits for a CRLFCRLF that never comes. The
// bare-LF request-smuggling shapes (Content-Length with
// Transfer-Encoding, two Authorization headers) are refused too, and
// what they smuggle is never served: a bare-LF head is refused whatever
// follows it, including when a CRLFCRLF later in the stream would have
// let fasthttp read it.
func TestMalformedHeadsAnsweredAtOnce(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.ReadTimeout = time.Minute })
	fetchTok, _ := h.mint(capClaims(0))
	produceTok, _ := h.mint(withOps(capClaims(0), "fetch", "produce"))
	h.produce(0, 2)
	highWatermark := func() int64 {
		r := h.get(fetchTok, recordsPath(0, "offset=0"))
		if r.status != http.StatusOK {
			t.Fatalf("fetch: %d %s", r.status, r.body)
		}
		return r.fetch(t).HighWatermark
	}
	before := highWatermark()
	smuggled := "POST " + recordsURL(0) + " HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer " + produceTok +
		"\r\nContent-Type: application/json\r\nContent-Length: 30\r\n\r\n" + `{"records":[{"value":"eA=="}]}`
	chunkedThenSmuggled := "0\r\n\r\n" + smuggled
	lf := func(s string) string { return strings.ReplaceAll(s, "\r\n", "\n") }
	bad := func(name, raw string) crlftest.Case {
		return crlftest.Case{Name: name, Raw: raw, Status: http.StatusBadRequest, Code: api.CodeBadRequest}
	}
	cases := []crlftest.Case{
		bad("bare LF everywhere", "GET /healthz HTTP/1.1\nHost: gw\n\n"),
		bad("bare LF after the request line", "GET /healthz HTTP/1.1\nHost: gw\r\n\r\n"),
		bad("bare LF on one header line", "GET /healthz HTTP/1.1\r\nHost: gw\nX-A: b\r\n\r\n"),
		bad("bare LF blank line, a CRLF request pipelined after", "GET /healthz HTTP/1.1\r\nHost: gw\r\n\nGET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n"),
		bad("bare LF fetch", lf("GET "+recordsPath(0, "offset=0")+" HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer "+fetchTok+"\r\n\r\n")),
		bad("bare LF Content-Length with Transfer-Encoding, smuggling a produce",
			lf("POST "+recordsURL(0)+" HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: "+strconv.Itoa(len(chunkedThenSmuggled))+
				"\r\nTransfer-Encoding: chunked\r\n\r\n")+chunkedThenSmuggled),
		bad("bare LF Content-Length with Transfer-Encoding, nothing after", lf("POST "+recordsURL(0)+" HTTP/1.1\r\nHost: gw\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n")),
		bad("bare LF two Authorization headers", lf("GET "+recordsPath(0, "offset=0")+" HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer x\r\nAuthorization: Bearer "+fetchTok+"\r\n\r\n")),
		bad("bare LF two Authorization headers, a chunk end after", lf("GET "+recordsPath(0, "offset=0")+" HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer "+fetchTok+"\r\nAuthorization: Bearer x\r\n\r\n")+"0\r\n\r\n"),
		bad("TLS handshake on the plain port", "\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03"),
		bad("NUL in a header value", "GET /healthz HTTP/1.1\r\nHost: gw\r\nX-A: a\x00b\r\n\r\n"),
		bad("NUL in the request line", "GET /heal\x00thz HTTP/1.1\r\nHost: gw\r\n\r\n"),
		bad("header without a colon", "GET /healthz HTTP/1.1\r\nHost: gw\r\nNoColon\r\n\r\n"),
		bad("bare LF header without a colon", "GET /healthz HTTP/1.1\nHost: gw\nNoColon\n\n"),
		bad("obs-fold continuation", "GET /healthz HTTP/1.1\r\nHost: gw\r\nX-A: a\r\n b\r\n\r\n"),
		bad("bare LF obs-fold continuation", "GET /healthz HTTP/1.1\nHost: gw\nX-A: a\n b\n\n"),
		bad("lone CR in a value", "GET /healthz HTTP/1.1\r\nHost: gw\r\nX-A: a\rb\r\n\r\n"),
		bad("lone CR in the request line", "GET /healthz\r HTTP/1.1\r\nHost: gw\r\n\r\n"),
		{Name: "header over max_header_bytes", Raw: "GET /healthz HTTP/1.1\r\nHost: gw\r\nX-A: " + strings.Repeat("a", 100_000) + "\r\n\r\n", Status: 431, Code: api.CodeHeadersTooLarge},
		bad("bare LF header over max_header_bytes", "GET /healthz HTTP/1.1\nHost: gw\nX-A: "+strings.Repeat("a", 100_000)+"\n\n"),
	}
	crlftest.ExpectOneAnswerEach(t, h.gw.Addr(), cases, 10*time.Second)
	if got := highWatermark(); got != before {
		t.Fatalf("high watermark %d after the smuggling attempts, want %d: a smuggled produce was served", got, before)
	}
	if r := h.get("", "/healthz"); r.status != http.StatusOK {
		t.Fatalf("healthz after the malformed requests: %d %s", r.status, r.body)
	}
}

// TestBareLFRefusedAfterAChunkedBody: after a chunked body the
// connection's heads are no longer followed by internal/crlf, so the
// header-line pass refuses the bare-LF lines fasthttp then accepts (it
// reads a head with bare-LF lines once a CRLFCRLF ends it).
func TestBareLFRefusedAfterAChunkedBody(t *testing.T) {
	h := newHarness(t, nil)
	produceTok, _ := h.mint(withOps(capClaims(0), "produce"))
	body := `{"records":[{"value":"eA=="}]}`
	raw := "POST " + recordsURL(0) + " HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer " + produceTok +
		"\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" + strconv.FormatInt(int64(len(body)), 16) + "\r\n" + body + "\r\n0\r\n\r\n" +
		"GET /healthz HTTP/1.1\r\nHost: gw\nX-A: b\r\n\r\n"
	answers, closed, err := crlftest.AnswersUntilClose(h.gw.Addr(), raw, 10*time.Second)
	if len(answers) != 2 || answers[0].Status != http.StatusOK || answers[1].Status != http.StatusBadRequest ||
		answers[1].Code != api.CodeBadRequest || !strings.Contains(answers[1].Body, "bare LF") || !closed || err != nil {
		t.Fatalf("answers %+v (closed %v, %v), want the chunked produce 200, then 400 bad_request naming the bare LF, then the connection closed", answers, closed, err)
	}
}

// TestKafkaClientAtTheHTTPPortIsLogged: a Kafka client whose bootstrap
// servers name the gateway's HTTP address (kcat -b 127.0.0.1:8080, the
// gateway's address in capgate dev's banner) gets the 400, which it reads
// as a Kafka answer ("Invalid response size 1213486160") — and the
// gateway logged nothing. Now it warns, with where Kafka clients belong;
// a TLS handshake on the plain port is not taken for one.
func TestKafkaClientAtTheHTTPPortIsLogged(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	h := newHarnessWith(t, harnessOptions{log: zap.New(core)})
	h.waitReady()
	apiVersions := "\x00\x00\x00\x1f\x00\x12\x00\x03\x00\x00\x00\x01\x00\x07rdkafka\x00"
	crlftest.ExpectOneAnswerEach(t, h.gw.Addr(), []crlftest.Case{
		{Name: "Kafka ApiVersions", Raw: apiVersions, Status: http.StatusBadRequest, Code: api.CodeBadRequest},
		{Name: "TLS handshake", Raw: "\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03", Status: http.StatusBadRequest, Code: api.CodeBadRequest},
	}, 10*time.Second)
	warned := logs.FilterMessageSnippet("a Kafka client connected to the gateway's HTTP address: set gateway.kafka_listen").All()
	if len(warned) != 1 {
		t.Fatalf("%d warnings of a Kafka client at the HTTP port, want 1 (the TLS handshake is none): %v", len(warned), logs.All())
	}
}

// TestOpaqueTokenSaysWhatAGatewayTakes: capgate's admin token (opaque, no
// dot) as the bearer of a fetch or a partition's produce was refused 401
// "malformed token: 3 dot-separated segments … expected, got 1" and no
// more; the 401 now says such a token is not for a gateway and what is.
// A token with dots keeps its bare reason.
func TestOpaqueTokenSaysWhatAGatewayTakes(t *testing.T) {
	h := newHarness(t, nil)
	const hint = "is not for a gateway: fetch with a capability"
	body := `{"records":[{"value":"eA=="}]}`
	for token, hinted := range map[string]bool{"F7wUApaww_wOZsmkCQ8slF_J-piFX1QwRbBAJXUlww0": true, "not.a.jwt": false} {
		for route, r := range map[string]response{
			"fetch":   h.get(token, recordsPath(0, "offset=0")),
			"produce": h.do(http.MethodPost, recordsURL(0), token, strings.NewReader(body), "Content-Type", "application/json"),
		} {
			if r.status != http.StatusUnauthorized || !strings.Contains(string(r.body), "malformed token") || strings.Contains(string(r.body), hint) != hinted {
				t.Errorf("%s with %q: %d %s; want 401 malformed, the hint %v", route, token, r.status, r.body, hinted)
			}
		}
	}
}
