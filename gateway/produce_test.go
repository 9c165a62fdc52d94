package gateway

import (
	"encoding/json"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
)

func TestProduceThenFetch(t *testing.T) {
	h := newHarness(t, nil)
	h.produce(2, 2)
	prod, _ := h.mint(withOps(capClaims(2), "produce"))
	body := `{"records":[{"key":"azE=","value":"djE=","headers":[{"key":"h","value":"eA=="}]},{"value":"djI="}]}`
	r := h.do(http.MethodPost, recordsURL(2), prod, strings.NewReader(body), "Content-Type", "application/json")
	var pr api.ProduceResponse
	if err := json.Unmarshal(r.body, &pr); err != nil || r.status != http.StatusOK || pr.BaseOffset != 2 || pr.Count != 2 {
		t.Fatalf("produce: %d %s", r.status, r.body)
	}
	fetch, _ := h.mint(capClaims(2))
	f := h.get(fetch, recordsPath(2, "offset=2")).fetch(t)
	if len(f.Records) != 2 || string(f.Records[0].Key) != "k1" || string(f.Records[0].Value) != "v1" ||
		f.Records[0].Headers[0].Key != "h" || string(f.Records[0].Headers[0].Value) != "x" ||
		f.Records[1].Key != nil || string(f.Records[1].Value) != "v2" || f.NextOffset != 4 {
		t.Fatalf("fetched %+v", f)
	}
	c := withOps(capClaims(99), "produce")
	unknown, _ := h.mint(c)
	expectError(t, h.do(http.MethodPost, recordsURL(99), unknown, strings.NewReader(`{"records":[{"value":"eA=="}]}`)), http.StatusNotFound, api.CodeNotFound)
}

// TestRevocationAckWaitsForProduceInFlight is the race of a holder whose
// capability is being revoked while its produce is on its way: the
// revocation was acknowledged (and the admin's revoke returned, "every
// gateway is safe") while the produce, admitted before, was still to
// land. A produce is now registered in flight like a fetch: the ack waits
// until Kafka answered it, and it is not cancelled (a write cancelled on
// its way could still land, unseen).
func TestRevocationAckWaitsForProduceInFlight(t *testing.T) {
	h := newHarness(t, nil)
	prod, done, release := h.heldProduce()
	var finished atomic.Bool
	acked := make(chan bool, 1)
	var fenceSeq atomic.Uint64
	h.sync.setOnPoll(func(after uint64) {
		if s := fenceSeq.Load(); s != 0 && after == s {
			select {
			case acked <- finished.Load():
			default:
			}
		}
	})
	fenceSeq.Store(h.sync.currentSeq() + 1)
	h.sync.push(api.SyncResponse{Fences: []api.Fence{{Group: "g", Topic: testTopic, Partition: 0, Epoch: 2}}})
	waitFor(t, "the fence applied", func() bool { return h.gw.view.Fence("g", testTopic, 0) == 2 })
	finished.Store(true)
	release()
	if r := <-done; r.status != http.StatusOK {
		t.Fatalf("the produce Kafka answered before the fence: %d %s, want 200", r.status, r.body)
	}
	select {
	case wasFinished := <-acked:
		if !wasFinished {
			t.Fatal("the fence was acknowledged while a produce under the fenced capability was still in flight")
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no ack of seq %d", fenceSeq.Load())
	}
	expectError(t, h.do(http.MethodPost, recordsURL(0), prod, strings.NewReader(`{"records":[{"value":"eA=="}]}`), "Content-Type", "application/json"),
		http.StatusConflict, api.CodeCapabilityRevoked)
}

// TestProduceRecordCountIsBounded: a produce carries at most
// max_produce_records records, refused before they are built. A 4 MiB
// body of 1.4 million empty records ({}) cost the gateway 884 MB of
// allocations (about 630 bytes per 3 body bytes: the decoded records,
// kgo's, the encoding) and was produced.
func TestProduceRecordCountIsBounded(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxProduceRecords = 100 })
	producer, _ := h.mint(withOps(capClaims(0), "fetch", "produce"))
	n := (4<<20 - 100) / len(`{"value":null},`)
	body := `{"records":[` + strings.Repeat(`{"value":null},`, n-1) + `{"value":null}]}`
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r := h.do(http.MethodPost, recordsURL(0), producer, strings.NewReader(body), "Content-Type", "application/json")
	runtime.ReadMemStats(&after)
	expectError(t, r, http.StatusBadRequest, api.CodeBadRequest)
	if !strings.Contains(string(r.body), "max_produce_records") {
		t.Errorf("refusal does not name the setting: %s", r.body)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 64<<20 {
		t.Errorf("a refused %d-record produce allocated %d MB", n, got>>20)
	}
	ok := `{"records":[` + strings.Repeat(`{"value":"eA=="},`, 99) + `{"value":"eA=="}]}`
	if r := h.do(http.MethodPost, recordsURL(0), producer, strings.NewReader(ok), "Content-Type", "application/json"); r.status != http.StatusOK {
		t.Fatalf("100 records: %d %s", r.status, r.body)
	}
	for _, bad := range []string{`{"records":[{}],"records":[{}]}`, `{"records":[{}]`, `{"records":{}}`, `[]`, `{"records":[{}]} x`, `{"records":[{"value":"eA==","x":1}]}`, `{"other":[]}`, `{"records":null}`} {
		expectError(t, h.do(http.MethodPost, recordsURL(0), producer, strings.NewReader(bad), "Content-Type", "application/json"), http.StatusBadRequest, api.CodeBadRequest)
	}
	for bad, says := range map[string]string{ // what was wrong in words, not Go's "<nil> where "[" was expected"
		`{"records":null}`: `"records" must be a list of records, got null`,
		`{"records":"x"}`:  `"records" must be a list of records, got a string`,
		`[]`:               `a produce must be a JSON object {"records":[...]}, got a list`,
		`{"records":[{"value":"eA=="},{"value":"eA==","value":"eQ=="}]}`: `records[1]: duplicate key "value"`,
		`{"records":[{"VALUE":"eA=="}]}`:                                 `records[0]: unknown field "VALUE" (did you mean "value"?)`,
	} {
		r := h.do(http.MethodPost, recordsURL(0), producer, strings.NewReader(bad), "Content-Type", "application/json")
		var e api.ErrorBody
		if err := json.Unmarshal(r.body, &e); err != nil || !strings.Contains(e.Error.Message, says) {
			t.Errorf("produce %s: %s, want the message to say %s", bad, r.body, says)
		}
	}
}

// TestProduceRefusesARecordWithoutValue is redteam4 item 4: a record with
// no "value" (a serializer dropping empty fields) was written as a
// tombstone, silently deleting its key on a compacted topic. A left-out
// value, a header's left-out key or value, are refused 400 naming the
// record, the whole produce unwritten; "value": null is the tombstone
// (and a header's null value Kafka's null header value).
func TestProduceRefusesARecordWithoutValue(t *testing.T) {
	h := newHarness(t, nil)
	post, base := producer(t, h)
	first := base(post(`{"records":[{"value":"eA=="}]}`))
	for bad, says := range map[string]string{
		`{"records":[{"value":"eA=="},{"value":"eA=="},{"value":""},{"key":"azE="}]}`:          `records[3]: value is required; send "value": null for a tombstone`,
		`{"records":[{"key":"azE=","headers":[{"key":"h","value":"eA=="}]}]}`:                  `records[0]: value is required`,
		`{"records":[{"value":"eA=="},{"value":"eA==","headers":[{"key":"h"}]}]}`:              `records[1]: headers[0]: value is required; send "value": null for a null header value`,
		`{"records":[{"value":"eA==","headers":[{"key":"h","value":null},{"value":"eA=="}]}]}`: `records[0]: headers[1]: key is required`,
		`{"records":[{"value":"eA==","headers":[{"key":null,"value":"eA=="}]}]}`:               `records[0]: headers[0]: key is required`,
	} {
		r := post(bad)
		expectError(t, r, http.StatusBadRequest, api.CodeBadRequest)
		if !strings.Contains(string(r.body), strings.ReplaceAll(says, `"`, `\"`)) {
			t.Errorf("produce %s: %s, want the message to say %s", bad, r.body, says)
		}
	}
	// Nothing of the refused produces was written: the next lands right
	// after the first. "value": null is a tombstone, a header's null value
	// a null header value.
	if got := base(post(`{"records":[{"key":"azE=","value":null,"headers":[{"key":"h","value":null}]},{"key":"azI=","value":""}]}`)); got != first+1 {
		t.Fatalf("after refused produces the next landed at %d, want %d: something refused was written", got, first+1)
	}
	fetch, _ := h.mint(capClaims(0))
	f := h.get(fetch, recordsPath(0, "offset="+strconv.FormatInt(first+1, 10))).fetch(t)
	if len(f.Records) != 2 || string(f.Records[0].Key) != "k1" || f.Records[0].Value != nil ||
		len(f.Records[0].Headers) != 1 || f.Records[0].Headers[0].Key != "h" || f.Records[0].Headers[0].Value != nil ||
		f.Records[1].Value == nil || len(f.Records[1].Value) != 0 {
		t.Fatalf("fetched %+v, want a tombstone with a null header value, then an empty value", f)
	}
}

// TestProduceRefusesLooseBase64 is redteam4 item 9: {"value":"aGVsbG8=\n"}
// was produced (200) as "hello" — encoding/json's base64 skips \r and \n
// anywhere — and "aGVsbG9=" (unused bits set) was "hello" too, while the
// spec says base64 and the rest of the API is strict. Every base64 field
// of a produce (a record's key and value, a header's value) is now read
// strictly: 400 naming the record and the field, nothing written.
func TestProduceRefusesLooseBase64(t *testing.T) {
	h := newHarness(t, nil)
	post, base := producer(t, h)
	first := base(post(`{"records":[{"value":"aGVsbG8="}]}`))
	lineBreak := `base64 with a line break ("\n" at character 8): send it on one line, as standard base64 without \r or \n (RFC 4648 §3.1)`
	for _, tc := range []struct{ body, says string }{
		{`{"records":[{"value":"aGVsbG8=\n"}]}`, "body: records[0]: value: " + lineBreak},
		{`{"records":[{"value":"eA=="},{"value":"aGVs\r\nbG8="}]}`, `body: records[1]: value: base64 with a line break ("\r" at character 4)`},
		{`{"records":[{"value":"eA=="},{"key":"aGVsbG8=\u000a","value":"eA=="}]}`, "body: records[1]: key: " + lineBreak},
		{`{"records":[{"value":"eA==","headers":[{"key":"h","value":"eA=="},{"key":"i","value":"aGVsbG8=\n"}]}]}`, "body: records[0]: headers[1]: value: " + lineBreak},
		{`{"records":[{"value":"aGVsbG9="}]}`, `body: records[0]: value: not canonical base64: in its last four characters "bG9=" the bits past the data must be zero (RFC 4648 §3.5)`},
		{`{"records":[{"key":"eB==","value":"eA=="}]}`, `body: records[0]: key: not canonical base64: in its last four characters "eB==" the bits past the data must be zero`},
	} {
		r := post(tc.body)
		var eb api.ErrorBody
		if json.Unmarshal(r.body, &eb) != nil || r.status != http.StatusBadRequest || eb.Error.Code != api.CodeBadRequest || !strings.HasPrefix(eb.Error.Message, tc.says) {
			t.Errorf("produce %s: %d %s, want 400 bad_request saying %s", tc.body, r.status, r.body, tc.says)
		}
	}
	// Nothing refused was written, and strict base64 with JSON escapes
	// ("\/", "\u0061") is still read.
	if got := base(post(`{"records":[{"key":"\/w==","value":"\u0061GVsbG8="}]}`)); got != first+1 {
		t.Fatalf("after the refused produces the next landed at %d, want %d", got, first+1)
	}
	fetch, _ := h.mint(capClaims(0))
	f := h.get(fetch, recordsPath(0, "offset="+strconv.FormatInt(first+1, 10))).fetch(t)
	if len(f.Records) != 1 || string(f.Records[0].Key) != "\xff" || string(f.Records[0].Value) != "hello" {
		t.Fatalf("fetched %+v", f.Records)
	}
}

// producer is a fetch+produce capability's produce to partition 0 (post)
// and the base offset of one that must have been accepted (base).
func producer(t *testing.T, h *harness) (post func(body string) response, base func(response) int64) {
	token, _ := h.mint(withOps(capClaims(0), "fetch", "produce"))
	post = func(body string) response {
		return h.do(http.MethodPost, recordsURL(0), token, strings.NewReader(body), "Content-Type", "application/json")
	}
	base = func(r response) int64 {
		t.Helper()
		var pr api.ProduceResponse
		if err := json.Unmarshal(r.body, &pr); err != nil || r.status != http.StatusOK {
			t.Fatalf("produce: %d %s", r.status, r.body)
		}
		return pr.BaseOffset
	}
	return post, base
}
