package coordinator

// Behavior: GET /healthz — public: 200 {"status":"ok"} while the event
// loop runs, 503 unavailable once it stopped (shutdown or a failed
// persist). GET /metrics — public: Prometheus text format from the
// coordinator's own registry.

import (
	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
)

func (c *Coordinator) handleHealth(ctx *fasthttp.RequestCtx, _ []string) {
	select {
	case <-c.loop.done:
		writeError(ctx, api.CodeUnavailable, "event loop stopped")
	default:
		writeJSON(ctx, fasthttp.StatusOK, map[string]string{"status": "ok"})
	}
}

func (c *Coordinator) handleMetrics(ctx *fasthttp.RequestCtx, _ []string) {
	c.metrics.handler(ctx)
}
