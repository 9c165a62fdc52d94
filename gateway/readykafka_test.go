package gateway

import (
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/api"
)

// TestReadyNeedsKafka: an operator's load balancer routes by /readyz. A
// synced gateway whose Kafka does not answer (every metadata request
// dropped) said ready while every fetch would fail 502; now /readyz is
// 503 unavailable naming the kafka check, /healthz stays 200 (restarting
// the gateway would not bring Kafka back), and once Kafka answers the
// gateway is ready again with every check ok.
func TestReadyNeedsKafka(t *testing.T) {
	h := newHarness(t, nil)
	if r := h.get("", "/readyz"); r.status != http.StatusOK || !strings.Contains(string(r.body), `"kafka":"ok"`) {
		t.Fatalf("/readyz with Kafka up: %d %s", r.status, r.body)
	}
	var down atomic.Bool
	cluster := h.kafka.Cluster()
	cluster.ControlKey(int16(kmsg.Metadata), func(kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		if down.Load() {
			return nil, errors.New("injected: Kafka unreachable"), true // the broker drops the connection
		}
		return nil, nil, false
	})
	down.Store(true)
	eventually := func(what string, ok func(response) bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second) // the cached answer lives probe.TTL, then one probe
		for {
			r := h.get("", "/readyz")
			if ok(r) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: last /readyz %d %s", what, r.status, r.body)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	eventually("/readyz to report Kafka unreachable", func(r response) bool {
		return r.status == http.StatusServiceUnavailable && r.errorCode() == api.CodeUnavailable &&
			strings.Contains(string(r.body), "kafka:") && r.header.Get("Retry-After") != ""
	})
	if r := h.get("", "/healthz"); r.status != http.StatusOK {
		t.Fatalf("/healthz with Kafka down: %d %s, want 200", r.status, r.body)
	}
	down.Store(false)
	eventually("/readyz ready again", func(r response) bool {
		return r.status == http.StatusOK && strings.Contains(string(r.body), `"kafka":"ok"`) && strings.Contains(string(r.body), `"sync":"ok"`)
	})
}
