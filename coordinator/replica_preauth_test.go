package coordinator_test

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
)

// TestReplicaFirstLargeRequestDuringAForgedFlood is
// TestFirstLargeRequestDuringAForgedFlood on a leading replica (Kafka-log
// state), whose server answers fasthttp's refusals itself (replica_http.go
// serveError): a new credential's first large join while forged tokens
// spend the header check's one budget is 429 rate_limited, then served —
// it was 413.
func TestReplicaFirstLargeRequestDuringAForgedFlood(t *testing.T) {
	const burst = 3
	topics := make([]string, 30) // a join of about 7 KB
	partitions := map[string]int32{}
	for i := range topics {
		topics[i] = fmt.Sprintf("%s-%03d", strings.Repeat("t", 230), i)
		partitions[topics[i]] = 1
	}
	e := newEnv(t, partitions)
	useKafkaState(t, e)
	e.cfg.AuthFailuresPerSecond, e.cfg.AuthFailureBurst = 0.001, burst // nothing refills during the test
	s := startReplicas(t, e, 1)
	h := s.harness(s.awaitLeader(t))
	stranger := &harness{env: h.env, base: h.base, client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext,
	}}}
	seen := h.clientCredential(t, []string{"g"}, []string{"*"})
	join := api.JoinRequest{Topics: topics, ClientID: "svc"}
	for i := range 2 * burst {
		if status, body, _ := stranger.do(t, "POST", "/v1/groups/g/join", forgedSignature(seen, i), join); status != http.StatusRequestEntityTooLarge {
			t.Fatalf("a forged credential on a large join: %d %s, want 413", status, body)
		}
	}
	fresh := h.clientCredential(t, []string{"g"}, []string{"*"}) // never verified: not cached
	status, body, header := h.do(t, "POST", "/v1/groups/g/join", fresh, join)
	if status != http.StatusTooManyRequests || errorCode(t, body) != api.CodeRateLimited || header.Get("Retry-After") == "" {
		t.Fatalf("a new credential's first large join during a forged flood: %d %s, want 429 rate_limited with Retry-After", status, body)
	}
	if status, body, _ = h.do(t, "POST", "/v1/groups/g/join", fresh, join); status != http.StatusOK {
		t.Fatalf("the same join sent again: %d %s, want 200", status, body)
	}
}
