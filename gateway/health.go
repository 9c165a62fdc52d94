package gateway

// Behavior: GET|HEAD /healthz answers 200 {"status":"ok"} whenever the
// process serves HTTP (liveness). GET|HEAD /readyz answers 200
// {"status":"ready","seq":N,"issuer","audience","keys":[kid…]} once the
// first sync has been applied and while the gateway is in sync: the
// issuer, audience and signing key ids it verifies capabilities with,
// all learned from the coordinator (none is configured on the gateway:
// an issuer or audience in its configuration is refused at start), so an
// operator can compare them with the coordinator's JWKS. 503 not_ready
// before the first sync, while the coordinator's settings do not fit
// sync_timeout, and while no signing key was learned (every capability
// would be refused); 503 out_of_sync while self-fenced (no good sync for
// sync_timeout); with Retry-After: 1 — the same refusals fetch and
// produce get. Neither needs a token.

import (
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
)

func (g *Gateway) handleHealth(ctx *fasthttp.RequestCtx) {
	writeJSONBody(ctx, []byte(`{"status":"ok"}`))
}

// readyBody is /readyz's answer.
type readyBody struct {
	Status   string   `json:"status"`
	Seq      uint64   `json:"seq"`
	Issuer   string   `json:"issuer"`
	Audience string   `json:"audience"`
	Keys     []string `json:"keys"`
}

func (g *Gateway) handleReady(ctx *fasthttp.RequestCtx) {
	if g.refuseUnsynced(ctx, time.Now()) != "" {
		return
	}
	keys := slices.Sorted(maps.Keys(g.view.Keys()))
	settings := g.follower.Settings()
	if len(keys) == 0 || settings == nil {
		setRetryAfter(ctx, time.Second)
		writeError(ctx, api.CodeNotReady, "no signing key learned from the coordinator: every capability would be refused", nil)
		return
	}
	// Strings and a number: encoding cannot fail.
	body, _ := json.Marshal(readyBody{Status: "ready", Seq: g.view.Seq(), Issuer: settings.Issuer, Audience: settings.Audience, Keys: keys})
	writeJSONBody(ctx, body)
}
