package coordinator_test

import (
	"testing"

	"github.com/capgate/capgate/api"
)

// TestJSONTypeErrorsWorded is the red team's heartbeat {"resync":1},
// answered "json: cannot unmarshal number into Go struct field .resync
// of type bool": Go's words, and a struct name the user never saw. A
// value of the wrong JSON type is now refused as StrictJSON's other
// refusals read — the field, where it is, the JSON type wanted and the
// one given — with the same 400 bad_request, on the member routes (join,
// heartbeat, commit) and the admin API, and changes nothing.
func TestJSONTypeErrorsWorded(t *testing.T) {
	e := newEnv(t, map[string]int32{"demo": 1})
	e.fill(t, 10)
	h := e.start(t)
	creds := h.clientCredential(t, []string{"g"}, []string{"demo"})
	h.refusedBody(t, "POST", "/v1/groups/g/join", creds, `{"topics":"demo"}`, `field "topics": want an array, got a string`)
	h.refusedBody(t, "POST", "/v1/groups/g/join", creds, `{"topics":["demo"],"session_timeout_ms":"30s"}`,
		`field "session_timeout_ms": want an integer, got a string`)
	m := h.join(t, "g", creds, api.JoinRequest{ClientID: "svc", Topics: []string{"demo"}, SessionTimeoutMs: 30000})

	h.refusedBody(t, "POST", "/v1/groups/g/heartbeat", m.token, `{"resync":1}`, `field "resync": want a boolean (true or false), got a number`)
	h.refusedBody(t, "POST", "/v1/groups/g/heartbeat", m.token, `{"wait_ms":0.5}`,
		`field "wait_ms": want an integer from -9223372036854775808 to 9223372036854775807, got the number 0.5`)
	h.refusedBody(t, "POST", "/v1/groups/g/commit", m.token,
		`{"offsets":[{"topic":"demo","partition":"0","offset":5,"capability":"c"}]}`,
		`field "partition" in offsets[0]: want an integer, got a string`)
	h.refusedBody(t, "POST", "/v1/groups/g/commit", m.token, `{"offsets":{"topic":"demo"}}`, `field "offsets": want an array, got an object`)
	var committed api.OffsetsResponse
	h.call(t, "GET", "/v1/groups/g/offsets", e.adminToken, nil, 200, &committed)
	if len(committed.Offsets) != 0 {
		t.Errorf("a refused commit committed: %+v", committed.Offsets)
	}
	h.refusedBody(t, "POST", "/v1/admin/capabilities", e.adminToken, `{"topic":"demo","partition":0,"holder":"a","ttl_ms":"1h"}`,
		`field "ttl_ms": want an integer, got a string`)
	h.refusedBody(t, "PUT", "/v1/admin/qos", e.adminToken, `{"selector":{"partition":"0"},"ttl_ms":1000}`,
		`field "partition" in selector: want an integer, got a string`)
	m.heartbeat(t, 1)
}
