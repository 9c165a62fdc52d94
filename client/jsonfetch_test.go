package client

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client/session"
)

// decodeJSONStd is the encoding/json decoder the SDK used before
// fastjson: the reference the fast one is checked and benchmarked
// against.
func decodeJSONStd(body []byte, req session.Fetch) (fetched, error) {
	var wire api.FetchResponse
	if err := json.Unmarshal(body, &wire); err != nil {
		return fetched{}, fmt.Errorf("decode answer: %w", err)
	}
	res := fetched{records: make([]Record, 0, len(wire.Records)), next: req.Offset}
	for _, w := range wire.Records {
		if w.Offset < res.next {
			continue
		}
		r := Record{
			Topic: req.Partition.Topic, Partition: req.Partition.Partition, Offset: w.Offset,
			Timestamp: time.UnixMilli(w.Timestamp), Key: w.Key, Value: w.Value, Headers: w.Headers, Epoch: req.Epoch,
		}
		res.bytes += r.size()
		res.records = append(res.records, r)
		res.next = w.Offset + 1
	}
	res.next = max(res.next, wire.NextOffset)
	return res, nil
}

// randomAnswer is a JSON fetch answer as the gateway writes it (standard
// base64, null for an absent key, headers omitted when none).
func randomAnswer(rng *rand.Rand, base int64, n int) []byte {
	resp := api.FetchResponse{Records: []api.Record{}, HighWatermark: base + int64(n) + rng.Int64N(5)}
	bytesOf := func(max int) []byte {
		switch rng.IntN(6) {
		case 0:
			return nil
		case 1:
			return []byte{}
		}
		b := make([]byte, rng.IntN(max))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return b
	}
	for i := range n {
		r := api.Record{Offset: base + int64(i), Timestamp: 1_700_000_000_000 + rng.Int64N(1e6), Key: bytesOf(16), Value: bytesOf(300)}
		if r.Value == nil {
			r.Value = []byte("v")
		}
		for range rng.IntN(3) {
			r.Headers = append(r.Headers, api.Header{Key: fmt.Sprintf("h%d", rng.IntN(9)), Value: bytesOf(8)})
		}
		resp.Records = append(resp.Records, r)
	}
	resp.NextOffset = base + int64(n) + rng.Int64N(3)
	b, err := json.Marshal(resp)
	if err != nil {
		panic(err)
	}
	return b
}

// TestDecodeJSONMatchesEncodingJSON: the fastjson decoder gives exactly
// what encoding/json gave, on 2,000 random answers (nil and empty keys,
// binary values, headers, records below the fetch offset, next_offset
// beyond the last record).
func TestDecodeJSONMatchesEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		base := rng.Int64N(1000)
		body := randomAnswer(rng, base, rng.IntN(40))
		req := session.Fetch{Partition: Partition{Topic: "orders", Partition: 3}, Epoch: 7, Offset: base + rng.Int64N(5)}
		want, werr := decodeJSONStd(body, req)
		got, gerr := decodeJSON(body, req)
		if (werr != nil) != (gerr != nil) {
			t.Fatalf("answer %d: errors differ: %v vs %v", i, werr, gerr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("answer %d: %s\n got %+v\nwant %+v", i, body, got, want)
		}
		if _, scanned := scanFetchJSON(body, req); !scanned {
			t.Fatalf("answer %d of the gateway's shape left to fastjson: %s", i, body)
		}
		if parsed, err := parseFetchJSON(body, req); err != nil || !reflect.DeepEqual(parsed, want) {
			t.Fatalf("answer %d: fastjson gave %+v %v", i, parsed, err)
		}
	}
}

// TestDecodeJSONOtherShapes: valid answers the scanner does not take
// (escapes, white space, another key order, floats) decode like
// encoding/json through fastjson.
func TestDecodeJSONOtherShapes(t *testing.T) {
	req := session.Fetch{Partition: Partition{Topic: "orders"}, Offset: 1}
	for _, body := range []string{
		`{"records":[{"offset":1,"timestamp":5,"key":null,"value":"aGk=","headers":[{"key":"a\u0062\n","value":"AA=="}]}],"next_offset":2,"high_watermark":2}`,
		` { "next_offset" : 9 , "records" : [ { "value" : "aGk=" , "offset" : 3 } ] } `,
		`{"records":[{"offset":1,"timestamp":5,"value":"aGk="}],"next_offset":2,"extra":{"x":[1.5]}}`,
		`{"records":[],"next_offset":0}`,
	} {
		want, werr := decodeJSONStd([]byte(body), req)
		got, gerr := decodeJSON([]byte(body), req)
		if werr != nil || gerr != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v %v\nwant %+v %v", body, got, gerr, want, werr)
		}
	}
}

// TestDecodeJSONRefusesBadAnswers: what is not a records answer is an
// error, never a panic or an empty success.
func TestDecodeJSONRefusesBadAnswers(t *testing.T) {
	req := session.Fetch{Partition: Partition{Topic: "orders"}}
	for _, body := range []string{
		``, `[]`, `{}`, `null`, `{"records":{}}`, `{"records":[1]}`,
		`{"records":[{"offset":"x"}]}`, `{"records":[{"offset":1,"key":"!!"}]}`,
		`{"records":[{"offset":1,"headers":[{"value":"AA=="}]}]}`,
		`{"records":[],"next_offset":"x"}`, `{"records":[]`,
	} {
		if res, err := decodeJSON([]byte(body), req); err == nil {
			t.Errorf("%s: decoded %+v, want an error", body, res)
		}
	}
}

// BenchmarkDecodeJSON: one answer of 5,000 100-byte records (1.4 MB of
// JSON) decoded by encoding/json (the SDK before), by fastjson alone and
// by the SDK's decoder (the scanner), in alternating blocks so all see
// the same machine (BENCHMARKS.md §10): the best block's records/s of
// each, and the SDK's speedup over encoding/json.
func BenchmarkDecodeJSON(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	resp := api.FetchResponse{}
	for i := range 5000 {
		v := make([]byte, 100)
		for j := range v {
			v[j] = byte(rng.IntN(256))
		}
		resp.Records = append(resp.Records, api.Record{Offset: int64(i), Timestamp: 1_700_000_000_000, Value: v})
	}
	resp.NextOffset = 5000
	body, err := json.Marshal(resp)
	if err != nil {
		b.Fatal(err)
	}
	req := session.Fetch{Partition: Partition{Topic: "orders"}}
	// Blocks of each decoder in turn, after a collection each, so one's
	// garbage is not collected on the other's time; the best block of
	// each counts (the machine is shared and noisy).
	const block = 4
	var best [3]time.Duration
	timeBlock := func(decode func([]byte, session.Fetch) (fetched, error)) time.Duration {
		runtime.GC()
		start := time.Now()
		for range block {
			if _, err := decode(body, req); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start) / block
	}
	decoders := [3]func([]byte, session.Fetch) (fetched, error){decodeJSONStd, parseFetchJSON, decodeJSON}
	for b.Loop() {
		for i, decode := range decoders {
			if d := timeBlock(decode); best[i] == 0 || d < best[i] {
				best[i] = d
			}
		}
	}
	n := float64(len(resp.Records))
	b.ReportMetric(n/best[0].Seconds(), "encoding_json_records/s")
	b.ReportMetric(n/best[1].Seconds(), "fastjson_records/s")
	b.ReportMetric(n/best[2].Seconds(), "sdk_records/s")
	b.ReportMetric(best[0].Seconds()/best[2].Seconds(), "speedup")
}
