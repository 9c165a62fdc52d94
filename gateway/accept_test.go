package gateway

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/capgate/capgate/api"
)

// TestAcceptNegotiation: the answer's media type follows Accept on every
// route that answers JSON, and on the fetch route, which also answers raw
// record batches. A client refusing every type a route answers in gets
// 406 not_acceptable (a JSON error body naming what is available); a
// q=0 refuses; types match case-insensitively; on equal terms JSON, but a
// type the client named beats one it reached through a wildcard. Before:
// every Accept got JSON unless it contained the record-batch type's name
// exactly — with q=0 too, and not in capitals.
func TestAcceptNegotiation(t *testing.T) {
	h := newHarness(t, nil)
	h.produce(0, 2)
	tok, _ := h.mint(capClaims(0))
	const jsonType, raw, none = api.MediaJSON, api.MediaRecordBatch, ""
	fetch := recordsPath(0, "offset=0")
	for _, c := range []struct {
		path, accept string
		want         string // the answer's Content-Type, none for 406
	}{
		{fetch, "", jsonType},
		{fetch, "*/*", jsonType},
		{fetch, raw, raw},
		{fetch, "APPLICATION/VND.KAFKA.RECORD-BATCH", raw},
		{fetch, " application/vnd.kafka.record-batch ; q=1", raw},
		{fetch, raw + ";q=0", none},
		{fetch, raw + ";q=0, application/json", jsonType},
		{fetch, raw + ";q=0, */*", jsonType},
		{fetch, jsonType + ", " + raw, jsonType},
		{fetch, raw + ", */*", raw},
		{fetch, "application/json;q=0", none},
		{fetch, "application/json;q=0, */*", raw},
		{fetch, "*/*;q=0", none},
		{fetch, "text/html", none},
		{fetch, "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", jsonType},
		{"/healthz", "text/html", none},
		{"/healthz", "Application/JSON; q=0", none},
		{"/healthz", "*/* ;q=0", none},
		{"/healthz", " Application/JSON ", jsonType},
		{"/healthz", raw, none},
		{"/readyz", "text/plain", none},
		{"/openapi.json", "text/html", none},
		{"/openapi.json", "application/*", jsonType},
	} {
		r := h.get(tok, c.path, "Accept", c.accept)
		switch {
		case c.want == none:
			expectError(t, r, http.StatusNotAcceptable, api.CodeNotAcceptable)
			var e struct {
				Error struct{ Available []string } `json:"error"`
			}
			if err := json.Unmarshal(r.body, &e); err != nil || len(e.Error.Available) == 0 || e.Error.Available[0] != api.MediaJSON {
				t.Errorf("GET %s Accept %q: 406 without the available types: %s", c.path, c.accept, r.body)
			}
		case r.status != http.StatusOK || r.header.Get("Content-Type") != c.want:
			t.Errorf("GET %s Accept %q: %d %s %.80s, want 200 %s", c.path, c.accept, r.status, r.header.Get("Content-Type"), r.body, c.want)
		}
	}
	// Produce answers JSON only.
	r := h.do(http.MethodPost, recordsURL(0), tok, strings.NewReader(`{"records":[{"value":"eA=="}]}`), "Content-Type", jsonType, "Accept", raw)
	expectError(t, r, http.StatusNotAcceptable, api.CodeNotAcceptable)
	// /metrics is Prometheus' text, never refused.
	if r := h.get("", "/metrics", "Accept", "text/html"); r.status != http.StatusOK {
		t.Errorf("/metrics Accept text/html: %d", r.status)
	}
	// Routing first: an unknown route or a wrong method is 404 / 405
	// whatever Accept says; a request the header-line checks refuse is
	// 400 (and closed), not 406.
	expectError(t, h.get(tok, "/v2/x", "Accept", "text/html"), http.StatusNotFound, api.CodeNotFound)
	expectError(t, h.do(http.MethodDelete, "/healthz", "", nil, "Accept", "text/html"), http.StatusMethodNotAllowed, api.CodeMethodNotAllowed)
	r = rawExchange(t, h.gw.Addr(), "GET "+fetch+" HTTP/1.1\r\nHost: gw\r\nAccept: text/html\r\nAuthorization: Bearer x\r\nAuthorization: Bearer "+tok+"\r\n\r\n")
	expectError(t, r, http.StatusBadRequest, api.CodeBadRequest)
}
