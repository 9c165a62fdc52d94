package coordinator

// Behavior: the answers to tenants' requests (the consumer routes: group
// reads, offsets, joins, heartbeats, commits, leaves, attenuations) are
// counted while their clients read them, when they are 16 KiB or more
// (internal/answerheld): max_answer_bytes_held in all,
// max_answer_bytes_held_per_tenant per tenant — the holder of
// bodyHolder, the tenant of a credential, member token, capability or
// IdP identity. A group read (GET) over either is answered 429
// rate_limited (its tenant's) or 503 overloaded (in all) with Retry-After
// instead, nothing changed; an answer to a request that changed state is
// sent and counted whatever it comes to, so a tenant's later reads wait
// for it. An answer is let through when its tenant, or the coordinator,
// holds nothing. Before, the tenant's read place and rate were all that
// bounded a tenant's answers, both given back when the handler returned:
// a tenant reading its describes (describe_bytes_max, 4 MiB), committed
// offsets (up to 4 KiB of metadata a partition: 40 MB at 10,000) or
// listings through connections that read slowly held ~20 MB of answers a
// second for write_timeout (10 s) — ~200 MB, and as much again for
// every other tenant doing so.

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/internal/answerheld"
	"github.com/capgate/capgate/ocap"
)

// countAnswer counts the large answer of a request that may have
// changed state (a consumer route's POST) among the answers held,
// whatever it comes to, and hands it to fasthttp as a stream giving its
// bytes back once written: it must be sent.
func (c *Coordinator) countAnswer(ctx *fasthttp.RequestCtx) {
	if holder := c.largeAnswerHolder(ctx); holder != "" {
		c.answers.Force(holder, int64(len(ctx.Response.Body())))
		c.streamAnswer(ctx, holder)
	}
}

// holdRead is countAnswer for a tenant's read (a GET, which changed
// nothing): over the caps its answer is replaced by the refusal.
func (c *Coordinator) holdRead(ctx *fasthttp.RequestCtx) {
	holder := c.largeAnswerHolder(ctx)
	if holder == "" {
		return
	}
	if why := c.answers.Take(holder, int64(len(ctx.Response.Body()))); why != answerheld.None {
		c.refuseAnswer(ctx, why)
		return
	}
	c.streamAnswer(ctx, holder)
}

// largeAnswerHolder is the tenant ctx's answer counts for if it is
// large enough to count, else "".
func (c *Coordinator) largeAnswerHolder(ctx *fasthttp.RequestCtx) string {
	if ctx.Response.IsBodyStream() || len(ctx.Response.Body()) < answerheld.Min { // a stream's Body() would read it all
		return ""
	}
	return c.answerHolder(ctx)
}

// streamAnswer hands ctx's answer, counted for holder, to fasthttp as a
// stream whose Close gives its bytes back. An answer set uncopied
// (SetBodyRaw, as /openapi.json's) is not in the buffer SwapBody takes:
// swapped, it went out empty and its counted bytes never came back.
func (c *Coordinator) streamAnswer(ctx *fasthttp.RequestCtx, holder string) {
	answer := ctx.Response.Body()
	body := ctx.Response.SwapBody(nil)
	if len(body) != len(answer) {
		body = answer
	}
	ctx.Response.SetBodyStream(answerheld.NewBody(c.answers, holder, body), len(body))
}

// answerHolder is the tenant ctx's large answer counts for: its bearer's
// (bodyHolder; an IdP token's identity, the tenant its members count
// for too), "" for none, the admin and sync tokens. The handler verified the bearer: it is in the
// verified-token cache, or, evicted since, verifies again unbudgeted.
func (c *Coordinator) answerHolder(ctx *fasthttp.RequestCtx) string {
	token := bearer(ctx)
	switch {
	case token == nil || c.adminTokens.matches(token) || c.syncTokens.matches(token):
		return ""
	case c.identities.Handles(token):
		// Its identity, as the handler verified it (identityClaims): the
		// tenant its members' requests count for too. Counted under its
		// token's iss and sub, an IdP tenant reading through its token
		// and through its members' had two per-tenant caps (redteam15's
		// left), and a subject_claim naming another claim than sub split
		// it further.
		if id, ok := ctx.UserValue(identityTenantKey).(string); ok {
			return tenantHolder(id)
		}
		return ""
	}
	if claims, ok := c.tokens.Get(token, c.now()); ok {
		return c.bodyHolder(claims)
	}
	for _, kind := range [...]ocap.Kind{ocap.KindMember, ocap.KindClient, ocap.KindCapability} {
		if claims, err := c.signatureFor(budget{}, token, kind); err == nil {
			return c.bodyHolder(claims)
		}
	}
	return ""
}

// refuseAnswer replaces a read's answer with the refusal of why.
func (c *Coordinator) refuseAnswer(ctx *fasthttp.RequestCtx, why answerheld.Refusal) {
	c.answersRefused.Inc()
	ctx.Response.Reset()
	if why == answerheld.OverAll {
		writeErrorDetails(ctx, api.CodeOverloaded, "the coordinator holds as many answer bytes for clients still reading them as it may (max_answer_bytes_held); retry shortly",
			map[string]any{"max_answer_bytes_held": c.cfg.MaxAnswerBytesHeld})
		return
	}
	writeErrorDetails(ctx, api.CodeRateLimited, "this tenant's answers not yet read by its clients hold as many bytes as they may (max_answer_bytes_held_per_tenant): read them first, then retry",
		map[string]any{"limit": "coordinator.max_answer_bytes_held_per_tenant", "max": c.cfg.MaxAnswerBytesHeldPerTenant})
}

// registerAnswers exports the answers held.
func (c *Coordinator) registerAnswers(r *prometheus.Registry) {
	c.answersRefused = prometheus.NewCounter(prometheus.CounterOpts{Name: "capgate_coordinator_answers_held_refused_total",
		Help: "Tenants' group reads refused (429, 503) because the answers their clients had not read yet held max_answer_bytes_held_per_tenant or max_answer_bytes_held."})
	r.MustRegister(c.answersRefused,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "capgate_coordinator_answer_bytes_held",
			Help: "Bytes of answers of 16 KiB and more to tenants' requests that their clients have not read yet (max_answer_bytes_held)."},
			func() float64 { return float64(c.answers.Held()) }))
}
