package coordinator

// Behavior: GET /healthz — public: 200 {"status":"ok"} while the event
// loop runs, 503 unavailable once it stopped (shutdown, or failed closed
// on a persist error or a failed safety audit: a liveness probe restarts
// the process). GET /readyz — public: 200 {"status":"ready"} while the
// store is open and the loop runs with a clean audit; otherwise 503
// unavailable whose message says why (the failure that closed it, or
// shutting down); a replica's leader adds "role":"leader". GET /metrics
// — public: Prometheus text format from the coordinator's own registry.

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

func (c *Coordinator) handleReady(ctx *fasthttp.RequestCtx, _ []string) {
	if err := c.loop.failure(); err != nil {
		writeError(ctx, api.CodeUnavailable, "failed closed: "+err.Error())
		return
	}
	select {
	case <-c.loop.done:
		writeError(ctx, api.CodeUnavailable, "shutting down")
	default:
		body := map[string]string{"status": "ready"}
		if c.embedded {
			body["role"] = "leader" // a replica's leader (replica_http.go: standbys)
		}
		writeJSON(ctx, fasthttp.StatusOK, body)
	}
}

func (c *Coordinator) handleMetrics(ctx *fasthttp.RequestCtx, _ []string) {
	c.metrics.handler(ctx)
}
