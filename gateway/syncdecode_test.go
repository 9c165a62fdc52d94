package gateway

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/capgate/capgate/api"
)

// fullSync is an answer with every member set, as the coordinator
// writes it (json.Marshal).
func fullSync(t testing.TB) []byte {
	u := api.SyncResponse{
		Seq: 42, Reset: true,
		Keys: []api.JWK{{Kty: "OKP", Crv: "Ed25519", X: "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo", Kid: "k1", Use: "sig", Alg: "EdDSA"}},
		Fences: []api.Fence{{Group: "g", Topic: "t", Partition: 0, Epoch: 3}, {Group: "g", Topic: "t", Partition: 1, Epoch: 1<<64 - 1},
			{Group: "g2", Topic: "t.x-y_z", Partition: -2147483648, Epoch: 0}, {Group: "", Topic: "", Partition: 2147483647, Epoch: 1}},
		Denied:         []api.Denied{{JTI: "j\"1<", Exp: 1700000000}},
		RevokedMembers: []api.RevokedMember{{Group: "g", MemberID: "m", Until: 1700000001}},
		QoS:            []api.QoSOverride{{ID: "q1", Selector: api.QoSSelector{Group: "g"}, MaxBytesPerSec: 1 << 20, Until: 1700000002}},
		Settings:       &api.CoordinatorSettings{Issuer: "i", Audience: "a", LeewayMs: 2000, MaxLeaseMs: 60000, GatewayTimeoutMs: 15000, MaxClockSkewMs: 1000},
	}
	body, err := json.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// TestScanSyncReadsTheCoordinatorsAnswers: the fast path takes an answer
// as the coordinator writes it and reads it as encoding/json does, and a
// fence's group and topic are shared by the fences in a row naming them.
func TestScanSyncReadsTheCoordinatorsAnswers(t *testing.T) {
	for _, body := range [][]byte{fullSync(t), []byte(`{"seq":7}`), []byte(`{"seq":7,"fences":[]}`), []byte(`{}`)} {
		got, ok := scanSync(body)
		want, err := strictSync(body)
		if !ok || err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s:\nscan (%v) %+v\nencoding/json (%v) %+v", body, ok, got, err, want)
		}
	}
	u := api.SyncResponse{Seq: 3}
	for p := range 3 {
		u.Fences = append(u.Fences, api.Fence{Group: "bulk-g", Topic: "bulk", Partition: int32(p), Epoch: 2})
	}
	body, _ := json.Marshal(u)
	got, ok := scanSync(body)
	if !ok || !reflect.DeepEqual(got, u) {
		t.Fatalf("scan %v %+v", ok, got)
	}
	if a, b := got.Fences[0].Topic, got.Fences[2].Topic; unsafe.StringData(a) != unsafe.StringData(b) {
		t.Fatal("each fence has a topic string of its own")
	}
}

// TestDecodeSyncIsAsStrictAsEncodingJSON: what the fast path does not
// take goes to encoding/json, so every answer decodes as it did and every
// answer encoding/json refused — an unknown key, a wrong type, a number
// out of range — is still refused: a gateway acknowledges nothing it
// cannot understand. Each case is checked against encoding/json itself.
func TestDecodeSyncIsAsStrictAsEncodingJSON(t *testing.T) {
	fence := func(members string) string {
		return `{"seq":2,"fences":[{"group":"g","topic":"t","partition":0,"epoch":1},{` + members + `}]}`
	}
	refused := []string{
		`{"seq":2,"fencez":[]}`,
		`{"seq":2,"fences":[],"surprise":1}`,
		fence(`"group":"g","topic":"t","partition":1,"epoch":2,"extra":true`),
		fence(`"group":"g","topic":"t","partition":"1","epoch":2`),
		fence(`"group":"g","topic":"t","partition":1.5,"epoch":2`),
		fence(`"group":"g","topic":"t","partition":2147483648,"epoch":2`),
		fence(`"group":"g","topic":"t","partition":-2147483649,"epoch":2`),
		fence(`"group":"g","topic":"t","partition":1,"epoch":-1`),
		fence(`"group":"g","topic":"t","partition":1,"epoch":18446744073709551616`),
		fence(`"group":5,"topic":"t","partition":1,"epoch":2`),
		fence(`"group":"g","topic":["t"],"partition":1,"epoch":2`),
		`{"seq":2,"fences":{"group":"g"}}`,
		`{"seq":2,"fences":[7]}`,
		`{"seq":2,"denied":[{"jti":"j","exp":1,"why":"x"}]}`,
		`{"seq":2,"settings":{"issuer":"i","leeway":3}}`,
		`{"seq":"2"}`,
		`[{"seq":2}]`,
		`{"seq":2`,
		`{"seq":2,"fences":[{"group":"g","topic":"t","partition":1,"epoch":2}`,
		``,
		// A '}' after a comma is no member's end (review22: the scan took it
		// for one and read on).
		`{"seq":2,}"reset":true}`,
		`{"seq":2,}"fences":[{"group":"g","topic":"t","partition":1,"epoch":2}]}`,
	}
	for _, body := range refused {
		if _, err := strictSync([]byte(body)); err == nil {
			t.Fatalf("encoding/json took %s: the case proves nothing", body)
		}
		if u, err := parseSync([]byte(body)); err == nil {
			t.Errorf("took %s: %+v", body, u)
		}
	}
	// Not the coordinator's shape, but answers encoding/json reads: they
	// decode the same (through it).
	taken := []string{
		`{ "seq": 2, "fences": [ {"group":"g","topic":"t","partition":1,"epoch":2} ] }`,
		`{"seq":2,"fences":[{"epoch":2,"partition":1,"topic":"t","group":"g"}]}`,
		`{"seq":2,"fences":[{"group":"g\u00fc","topic":"t\"","partition":1,"epoch":2}]}`,
		`{"seq":2,"fences":[{"group":"ü","topic":"t","partition":-0,"epoch":2}]}`,
		`{"seq":2,"fences":null}`,
		`{"seq":2,"Fences":[{"group":"g","topic":"t","partition":1,"epoch":2}]}`,
		`{"seq":2,"fences":[{"group":"a","topic":"t","partition":1,"epoch":1}],"fences":[{"group":"b","topic":"t","partition":2,"epoch":2}]}`,
		`{"seq":2,"fences":[{"group":"g","topic":"t","partition":1,"epoch":2}]} trailing`,
	}
	for _, body := range taken {
		want, err := strictSync([]byte(body))
		if err != nil {
			t.Fatalf("encoding/json refused %s: %v", body, err)
		}
		if got, err := parseSync([]byte(body)); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got (%v) %+v\nwant %+v", body, err, got, want)
		}
	}
	if _, err := decodeSync(strings.NewReader(`{"seq":2,"fences":[]}`+strings.Repeat(" ", 64)), 32); err == nil || !strings.Contains(err.Error(), "larger than 32 bytes") {
		t.Fatalf("over the limit: %v", err)
	}
}

// FuzzDecodeSync: on any input, the decoder refuses what encoding/json
// refuses and reads what it reads, the same. `go test` runs the seeds.
func FuzzDecodeSync(f *testing.F) {
	f.Add(fullSync(f))
	f.Add([]byte(`{"seq":2,"fences":[{"group":"g","topic":"t","partition":-12,"epoch":0}],"qos":[]}`))
	f.Add([]byte(`{"seq":2,"keys":[{"kty":"OKP","x":"a\"b"}],"fences":[]}`))
	f.Add([]byte(`{"seq":2,}"reset":true}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		want, werr := strictSync(body)
		got, err := parseSync(body)
		if (err == nil) != (werr == nil) || (err == nil && !reflect.DeepEqual(got, want)) {
			t.Fatalf("%q:\n got (%v) %+v\nwant (%v) %+v", body, err, got, werr, want)
		}
	})
}

// BenchmarkDecodeSyncBulk: decoding the delta a revoke of a member
// holding 10,000 partitions brings, beside encoding/json.
func BenchmarkDecodeSyncBulk(b *testing.B) {
	u := api.SyncResponse{Seq: 2}
	for p := range 10_000 {
		u.Fences = append(u.Fences, api.Fence{Group: "bulk-g", Topic: "bulk", Partition: int32(p), Epoch: 2})
	}
	u.RevokedMembers = []api.RevokedMember{{Group: "bulk-g", MemberID: "m-1", Until: 1700000000}}
	body, _ := json.Marshal(u)
	for _, c := range []struct {
		name   string
		decode func([]byte) (api.SyncResponse, error)
	}{{"scan", parseSync}, {"encoding-json", strictSync}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if got, err := c.decode(body); err != nil || len(got.Fences) != len(u.Fences) {
					b.Fatal(len(got.Fences), err)
				}
			}
		})
	}
}
