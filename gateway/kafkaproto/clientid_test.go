package kafkaproto

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/ocap"
)

// TestCapgateClientID: every client.id Kafka allows becomes a capgate
// client_id the coordinator takes (a name, or empty), recognisably; a
// valid one is unchanged.
func TestCapgateClientID(t *testing.T) {
	long := strings.Repeat("a", 300)
	for in, want := range map[string]string{
		"":                                "",
		"okapp":                           "okapp",
		"my app":                          "my_app",
		"billing/eu-1":                    "billing_eu-1",
		"Zürich-7":                        "Z_rich-7",
		"tab\there\x00nul\n":              "tab_here_nul_",
		"\xff\xfebad":                     "__bad",
		".":                               "_",
		"..":                              "__",
		"...":                             "...",
		long:                              long[:255],
		strings.Repeat("é", 300):          strings.Repeat("_", 255),
		strings.Repeat("c", 255):          strings.Repeat("c", 255),
		"rdkafka " + long:                 "rdkafka_" + long[:247],
		"kgo/" + strings.Repeat("x", 251): "kgo_" + strings.Repeat("x", 251),
	} {
		got := capgateClientID(in)
		if got != want {
			t.Errorf("capgateClientID(%.40q) = %.40q (%d), want %.40q (%d)", in, got, len(got), want, len(want))
		}
		if got != "" && !ocap.ValidName(got) {
			t.Errorf("capgateClientID(%.40q) = %.40q is not a name", in, got)
		}
	}
}

// TestLongClientIDsAreKeptBounded is redteam19's recommendation 3: a
// connection kept a request's client.id as sent (up to 32,767 bytes) in
// the client keys its members are listed under (clientKey, holderKey),
// one per member: 10,000 members at kafka_max_members held ~320 MB. Two
// connections of one client send requests with client.ids of 30,000
// bytes that differ only in their last byte, a third the first's again:
// each connection's keys keep at most keptClientIDMax bytes, the first
// and the third share theirs (one client) and the second's differs
// (another client: it reaches none of the first's members). Fails
// without keptClientID (keys of 30,000 bytes).
func TestLongClientIDsAreKeptBounded(t *testing.T) {
	s, err := New(testConfig(), refuseGate{}, anyClient{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	base := strings.Repeat("c", 29_999)
	var keys []clientKey
	var holders []holderKey
	for _, id := range []string{base + "1", base + "2", base + "1"} {
		p, _ := anyClient{}.Authenticate("credential", netip.Addr{}, time.Now())
		c := &conn{s: s, principal: p, remoteIP: "10.0.0.1", sasl: saslDone, reauthBy: time.Now().Add(time.Hour)}
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(3)
		if _, err := c.dispatch(header{key: req.Key(), version: 3, clientID: id}, req); err != nil {
			t.Fatal(err)
		}
		keys, holders = append(keys, c.key()), append(holders, c.holderKey())
	}
	for i, k := range keys {
		if n := len(k.clientID); n > keptClientIDMax || n < keptClientIDPrefix {
			t.Errorf("connection %d's client key keeps a client.id of %d bytes, want %d to %d", i, n, keptClientIDPrefix, keptClientIDMax)
		}
		if n := len(holders[i].clientID); n > keptClientIDMax {
			t.Errorf("connection %d's holder key keeps a client.id of %d bytes, want at most %d", i, n, keptClientIDMax)
		}
		if !strings.HasPrefix(k.clientID, base[:keptClientIDPrefix]) {
			t.Errorf("connection %d's kept client.id %.40q… does not start with the one sent", i, k.clientID)
		}
	}
	if keys[0] != keys[2] || holders[0] != holders[2] {
		t.Error("one client.id sent on two connections kept as two keys: its connections would not share their members")
	}
	if keys[0] == keys[1] || holders[0] == holders[1] {
		t.Error("two client.ids differing in their last byte kept as one key: one client would reach the other's members")
	}
	if got := keptClientID("short id"); got != "short id" {
		t.Errorf("keptClientID(%q) = %q, want it unchanged", "short id", got)
	}
}
