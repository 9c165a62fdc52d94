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
// sync_timeout) — both naming the last sync poll's error while polls
// fail (checks.sync) — and 503 not_ready naming the id while the coordinator
// refuses it because another gateway process holds it (409 conflict to
// this one's polls: set a distinct gateway.id); with Retry-After: 1 — the same refusals fetch and
// produce get. In sync, it also needs Kafka: 503 unavailable naming the
// kafka check while the last probe of Kafka failed (a metadata request
// for no topic, cached for probe.TTL, one at a time: the first /readyz
// waits for it, later ones answer from the last result), as the
// coordinator's /readyz. The ready answer carries "checks":{"sync":"ok",
// "kafka":"ok"}. Neither needs a token.

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
)

func (g *Gateway) handleHealth(ctx *fasthttp.RequestCtx) {
	writeJSONBody(ctx, []byte(`{"status":"ok"}`))
}

// readyBody is /readyz's answer.
type readyBody struct {
	Status   string            `json:"status"`
	Seq      uint64            `json:"seq"`
	Checks   map[string]string `json:"checks"`
	Issuer   string            `json:"issuer"`
	Audience string            `json:"audience"`
	Keys     []string          `json:"keys"`
}

func (g *Gateway) handleReady(ctx *fasthttp.RequestCtx) {
	if why := g.refusedReason(); why != "" {
		setRetryAfter(ctx, time.Second)
		writeError(ctx, api.CodeNotReady, "not ready: "+why, map[string]any{"checks": map[string]string{"sync": "conflict"}})
		return
	}
	if code := g.syncRefusal(time.Now()); code != "" {
		// Why the polls fail (a sync token the coordinator refuses, a
		// coordinator_url that is no coordinator, one that does not
		// answer): it said only "has not synced yet" (newuser4 #16).
		message, details := g.unsyncedMessage(code), map[string]any{"checks": map[string]string{"sync": "not synced"}}
		if failed := g.sync.failed.Load(); failed != nil {
			message += "; the last sync poll failed: " + *failed
			details["checks"] = map[string]string{"sync": *failed}
		}
		setRetryAfter(ctx, time.Second)
		writeError(ctx, code, message, details)
		return
	}
	keys := slices.Sorted(maps.Keys(g.view.Keys()))
	settings := g.follower.Settings()
	if len(keys) == 0 || settings == nil {
		setRetryAfter(ctx, time.Second)
		writeError(ctx, api.CodeNotReady, "no signing key learned from the coordinator: every capability would be refused", nil)
		return
	}
	checks := map[string]string{"sync": "ok", "kafka": "ok"}
	if why := g.kafkaUp.Status(time.Now(), g.probeKafka); why != "" {
		checks["kafka"] = why
		setRetryAfter(ctx, time.Second)
		writeError(ctx, api.CodeUnavailable, "not ready: kafka: "+why, map[string]any{"checks": checks})
		return
	}
	// Strings and a number: encoding cannot fail.
	body, _ := json.Marshal(readyBody{Status: "ready", Seq: g.view.Seq(), Checks: checks, Issuer: settings.Issuer, Audience: settings.Audience, Keys: keys})
	writeJSONBody(ctx, body)
}

// probeTimeout bounds one readiness probe of Kafka.
const probeTimeout = 2 * time.Second

// probeKafka asks Kafka for metadata of no topic (its brokers only).
func (g *Gateway) probeKafka() error {
	ctx, cancel := context.WithTimeout(context.Background(), min(probeTimeout, g.cfg.Broker.RequestTimeout))
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{} // none: not nil, which asks for every topic
	_, err := g.broker.Request(ctx, req)
	return err
}
