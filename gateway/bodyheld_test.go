package gateway

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/internal/bodyheld/bodyheldtest"
)

// TestLargeBodiesHeldAreBounded is redteam10 #4, the attack as its test:
// a bearer allowed to produce opens connections and sends only the
// headers of a 4 MiB produce; fasthttp allocated each body at its
// Content-Length at once and waited read_timeout for it (200
// connections: 639 MiB; max_connections_per_address 2,000: 8 GiB). Now
// the bodies held are counted from their headers: here 8 MiB per holder,
// so of ten such connections two are read and the other eight answered
// 429 too_many_fetches at once (the body not read); another credential's
// 4 MiB produce is still written; once the connections go, nothing is
// held.
func TestLargeBodiesHeldAreBounded(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.MaxBodyBytesHeld, c.MaxBodyBytesHeldPerHolder = 32<<20, 8<<20
		// The attacker's connections, not the clock, end the hold: with
		// the harness's 2 s read_timeout a busy machine (CI) let the two
		// held bodies time out before the attacker's own produce, which
		// was then served (200, want 429).
		c.ReadTimeout = time.Minute
	})
	attacker, _ := h.mintCredential([]string{testTopic}, []string{"consume", "produce"}, time.Now(), time.Hour)
	victim, _ := h.mintCredential([]string{testTopic}, []string{"consume", "produce"}, time.Now(), time.Hour)

	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", topicRecordsPath, attacker, 4<<20)
	statuses, closeAll := bodyheldtest.Heads(t, h.gw.Addr(), head, 10, 8)
	defer closeAll()
	for _, status := range statuses {
		if status != http.StatusTooManyRequests {
			t.Fatalf("a body over the holder's bytes held answered %d, want 429", status)
		}
	}

	rec := `{"value":"` + strings.Repeat("A", 800_000) + `"}`
	big := `{"records":[` + strings.Join([]string{rec, rec, rec, rec}, ",") + `]}` // 3.2 MB, each record under Kafka's 1 MB
	if r := h.produceTopic(victim, testTopic, big); r.status != http.StatusOK {
		t.Fatalf("another credential's 4 MiB produce beside them: %d %.300s", r.status, r.body)
	}
	r := h.produceTopic(attacker, testTopic, big)
	expectError(t, r, http.StatusTooManyRequests, api.CodeTooManyFetches)

	closeAll()
	waitFor(t, "the bodies released", func() bool { return h.gw.bodies.Held() == 0 })
	if r := h.produceTopic(attacker, testTopic, big); r.status != http.StatusOK {
		t.Fatalf("its produce once its connections went: %d %.300s", r.status, r.body)
	}
}

// TestLargeBodiesHeldInAll (redteam10 #4): over max_body_bytes_held in
// all, another holder's large produce is answered 503 overloaded
// (Retry-After: try another gateway) from its headers — with "Expect:
// 100-continue", before it sends the body.
func TestLargeBodiesHeldInAll(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxBodyBytesHeld, c.MaxBodyBytesHeldPerHolder = 8<<20, 8<<20 })
	first, _ := h.mintCredential([]string{testTopic}, []string{"consume", "produce"}, time.Now(), time.Hour)
	other, _ := h.mint(withOps(capClaims(0), "produce"))
	for range 2 {
		c, err := net.Dial("tcp", h.gw.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n", topicRecordsPath, first, 4<<20)
	}
	waitFor(t, "8 MiB of bodies held", func() bool { return h.gw.bodies.Held() == 8<<20 })
	raw := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer %s\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n", recordsURL(0), other, 4<<20)
	r := rawExchange(t, h.gw.Addr(), raw)
	expectError(t, r, http.StatusServiceUnavailable, api.CodeOverloaded)
	if r.header.Get("Retry-After") == "" {
		t.Fatalf("503 without Retry-After: %v", r.header)
	}
	if h.gw.bodies.Pending() != 2 {
		t.Fatalf("%d requests hold bodies, want the first holder's 2", h.gw.bodies.Pending())
	}
}
