package api

import "testing"

// TestNegotiate: which media type an answer takes for an Accept header,
// on a route answering JSON only and on the gateway's fetch route (JSON
// first, record batches second); "" is 406.
func TestNegotiate(t *testing.T) {
	json, raw := MediaJSON, MediaRecordBatch
	for _, c := range []struct {
		accept          string
		jsonOnly, fetch string
	}{
		{"", json, json},
		{"*/*", json, json},
		{"application/json", json, json},
		{"application/vnd.kafka.record-batch", "", raw},
		{"text/html", "", ""},
		{"text/html, application/xhtml+xml, application/xml;q=0.9, */*;q=0.8", json, json}, // a browser
		{"application/json;q=0", "", ""},
		{"application/json; q=0", "", ""},
		{"application/json;q=0.000", "", ""},
		{"application/json;Q=0", "", ""},
		{"*/*;q=0", "", ""},
		{"*/* ; q=0", "", ""},
		{"application/*;q=0", "", ""},
		{"*/*, application/json;q=0", "", raw},             // the specific range refuses JSON
		{"application/json;q=0, */*", "", raw},             // order does not matter
		{"application/*, application/json;q=0", "", raw},   // type/* matches record batches
		{"application/vnd.kafka.record-batch;q=0", "", ""}, // q=0 refuses, it does not ask
		{"application/vnd.kafka.record-batch;q=0, */*", json, json},
		{"APPLICATION/VND.KAFKA.RECORD-BATCH", "", raw}, // media types are case-insensitive
		{"  Application/Json  ", json, json},
		{"\tapplication/vnd.kafka.record-batch\t;\tq=1\t", "", raw},
		{"application/json;q=0.5, application/vnd.kafka.record-batch", json, raw},
		{"application/json, application/vnd.kafka.record-batch;q=0.9", json, json},
		{"application/json, application/vnd.kafka.record-batch", json, json}, // a tie: the server's order
		{"application/vnd.kafka.record-batch, application/json", json, json}, // the client's order does not count
		{"application/vnd.kafka.record-batch, */*", json, raw},               // a tie: the named type over */*
		{"application/json;charset=utf-8", json, json},                       // parameters other than q are ignored
		{"application/json;q=0.5;ext=1, text/html", json, json},              // accept-ext after q
		{"application/json;q=2", json, json},                                 // not a qvalue: the element is ignored, so is the header
		{"application/json;q=0.5x, text/html", "", ""},                       // the bad element ignored, text/html left
		{"json", json, json},                                                 // no element parses: as if absent
		{"*/json", json, json},                                               // not a media range
		{",,, ,", json, json},
		{"application/json;q=0, application/json;q=1", json, json}, // equally specific: the higher q
	} {
		for _, route := range []struct {
			offers []string
			want   string
		}{{[]string{json}, c.jsonOnly}, {[]string{json, raw}, c.fetch}} {
			got, ok := Negotiate([]byte(c.accept), route.offers...)
			if got != route.want || ok != (route.want != "") {
				t.Errorf("Accept %q offering %v: %q, %v; want %q", c.accept, route.offers, got, ok, route.want)
			}
		}
	}
}

// TestNegotiateAllocatesNothing: it runs on every fetch that sends an
// Accept header.
func TestNegotiateAllocatesNothing(t *testing.T) {
	accept := []byte("text/html, application/vnd.kafka.record-batch;q=0.9, */*;q=0")
	if n := testing.AllocsPerRun(100, func() { Negotiate(accept, MediaJSON, MediaRecordBatch) }); n != 0 {
		t.Fatalf("%v allocations per call", n)
	}
}
