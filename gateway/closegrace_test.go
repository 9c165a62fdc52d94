package gateway

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// TestCloseCutsOffAtTheDeadline: a produce still being served at
// shutdown_timeout (Kafka answered, its handler held after that) is cut
// off there: Close returns at the deadline with an error naming the HTTP
// server, warns that it cut the server off and that the gateway does not
// leave the coordinator (a handler still serves), and does not leave.
// The produce still gets its answer once its handler is let go.
func TestCloseCutsOffAtTheDeadline(t *testing.T) {
	// margin: room for a loaded machine (the race run, 2 busy cores);
	// without the cut-off Close waits for the held handler, for ever.
	const grace, margin = time.Second, 2 * time.Second
	core, logs := observer.New(zap.WarnLevel)
	h := newHarnessWith(t, harnessOptions{log: zap.New(core), edit: func(c *Config) { c.ShutdownTimeout = grace }})
	h.waitReady()
	_, done, release := h.heldProduce()

	start := time.Now()
	err := h.gw.Close()
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "http server") {
		t.Errorf("Close: %v, want the HTTP server cut off", err)
	}
	if took < grace || took > grace+margin {
		t.Errorf("Close took %v, want its shutdown_timeout (%v, +%v)", took, grace, margin)
	}
	for _, want := range []string{"shutdown_timeout cut the HTTP server off", "not leaving the coordinator"} {
		if logs.FilterMessageSnippet(want).Len() != 1 {
			t.Errorf("no warning %q; logged: %v", want, logs.All())
		}
	}
	if left := h.sync.leaveLog(); len(left) != 0 {
		t.Errorf("the gateway left the coordinator (%v) while a handler still served", left)
	}
	release()
	if r := <-done; r.status != http.StatusOK {
		t.Errorf("the produce cut off: %d %s, want Kafka's answer once its handler goes on", r.status, r.body)
	}
}

// heldProduce sends a produce to partition 0 under a capability prod and
// returns once Kafka answered it, with its handler held there until
// release (also called at the test's end); done gets the answer.
func (h *harness) heldProduce() (prod string, done <-chan response, release func()) {
	h.t.Helper()
	prod, _ = h.mint(withOps(capClaims(0), "produce"))
	answered, held := make(chan struct{}), make(chan struct{})
	release = sync.OnceFunc(func() { close(held) })
	h.t.Cleanup(release)
	h.gw.afterProduce = func() {
		close(answered)
		<-held
	}
	out := make(chan response, 1)
	go func() {
		out <- h.do(http.MethodPost, recordsURL(0), prod, strings.NewReader(`{"records":[{"value":"eA=="}]}`), "Content-Type", "application/json")
	}()
	<-answered
	return prod, out, release
}
