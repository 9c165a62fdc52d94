package gateway

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/api"
)

// TestOffsetWordResolvedInFlight is redteam20's recommendation #2:
// offset=earliest|latest was resolved with ListOffsets before the fetch
// was counted in flight, so against a stalled broker (a leaderless
// partition: up to request_timeout a call) one holder could have any
// number of resolutions waiting at once, outside max_inflight_fetches,
// the per-tenant and the per-holder caps. Kafka holds every ListOffsets
// here; the first one to arrive must find its fetch already counted, and
// the holder's fetches past its cap are refused 429 while the broker
// still holds the others.
func TestOffsetWordResolvedInFlight(t *testing.T) {
	const perHolder = 2
	h := newHarness(t, func(c *Config) {
		c.MaxInflightFetchesPerHolder = perHolder
		c.Broker.RequestTimeout = time.Minute // the stall outlasts the test
	})
	h.produce(0, 3)
	tok, _ := h.mint(capClaims(0))
	cl := h.kafka.Cluster()
	counted := make(chan int, 16)
	release := make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(free)
	cl.ControlKey(int16(kmsg.ListOffsets), func(kmsg.Request) (kmsg.Response, error, bool) {
		cl.KeepControl()
		counted <- h.gw.inflight.count()
		cl.SleepControl(func() { <-release })
		return nil, nil, false
	})
	answers := make(chan response, perHolder+2)
	for range perHolder + 2 {
		go func() { answers <- h.get(tok, recordsPath(0, "offset=latest")) }()
	}
	if n := <-counted; n < 1 {
		t.Fatalf("a ListOffsets for offset=latest reached Kafka while %d fetches were counted in flight: resolved outside the in-flight caps", n)
	}
	for range 2 {
		expectError(t, <-answers, http.StatusTooManyRequests, api.CodeTooManyFetches)
	}
	if n := h.gw.inflight.count(); n != perHolder {
		t.Fatalf("%d fetches in flight while Kafka holds their resolutions, want %d", n, perHolder)
	}
	free()
	for range perHolder {
		r := <-answers
		if r.status != http.StatusOK {
			t.Fatalf("a held resolution once Kafka answered: %d %s", r.status, r.body)
		}
		if got := r.fetch(t); got.NextOffset != 3 {
			t.Fatalf("offset=latest resolved to next_offset %d, want 3", got.NextOffset)
		}
	}
}
