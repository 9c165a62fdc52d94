package coordinator

// Behavior: GET /v1/sync?gateway={id}&after={seq}&wait_ms={n} — bearer: a
// sync token (401 otherwise) and/or a client certificate, as tls.sync
// says (403 client_certificate_required without it), whose common name
// or a DNS name is the gateway id when tls.sync_bind_identity (403
// gateway_identity_mismatch otherwise). gateway is required (1-255 printable
// characters without '/'); after defaults to 0 (a full snapshot); wait_ms
// to groups.sync_wait_max, which also caps it. Polling with after=S
// acknowledges S. The poll is held until something newer than after
// exists or the wait ends, then answered as api.SyncResponse: a delta, or
// a full snapshot with reset:true when after is 0 or outside the retained
// log (always after a coordinator restart). keys carries the whole public
// key set on a reset and whenever the signing keys changed.
//
// instance (optional, 1-64 characters [A-Za-z0-9_-]) is the gateway
// process's nonce, drawn at its start: while another instance holds the
// id and polled within groups.gateway_timeout (or, under
// silent_gateways: serve, until it leaves) the poll answers 409 conflict
// naming the id and acknowledges nothing; the holder keeps it. A poll
// without instance is served as from the holder (gateways from before
// the nonce). See coordinator/group/gateways.go.

import (
	"math"
	"time"

	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/driver"
	"github.com/capgate/capgate/coordinator/group"
	"github.com/capgate/capgate/coordinator/leader"
	"github.com/capgate/capgate/ocap"
	"github.com/capgate/capgate/store"
)

func (c *Coordinator) handleSync(ctx *fasthttp.RequestCtx, _ []string) {
	gateway, ok := c.syncCaller(ctx)
	if !ok {
		return
	}
	after, ok := uintArg(ctx, "after")
	if !ok {
		return
	}
	waitMs, ok := uintArg(ctx, "wait_ms")
	if !ok {
		return
	}
	instance, ok := syncInstance(ctx)
	if !ok {
		return
	}
	confirm := c.leadershipMark()
	msg, err := c.call(func(ref group.Ref) group.Event {
		return group.SyncPoll{Ref: ref, Gateway: gateway, Instance: instance, After: after, Wait: time.Duration(min(waitMs, 1<<40)) * time.Millisecond}
	})
	reply, ok := msg.(group.SyncReply)
	if !ok {
		c.idConflict(msg, "sync poll", gateway, instance)
		writeMachineError(ctx, msg, err)
		return
	}
	if err := confirm(leader.AnswerSync); err != nil {
		// Deposed (or the log broke) since the poll arrived: what the
		// machine answered from memory may be older than what the new
		// leader published, so none of it leaves.
		c.log.Warn("sync answer withheld: leadership not confirmed by the log", zap.String("gateway", gateway), zap.Error(err))
		writeNotLeader(ctx, "", "this replica no longer leads the shard")
		return
	}
	ring := c.keys.jwks.Load() // the ring the answer carries, and its share's key
	b, err := c.syncShare.encode(after, reply, c.syncResponse(reply, ring), ring)
	if err != nil {
		writeError(ctx, api.CodeInternal, "encode response")
		return
	}
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType(api.MediaJSON)
	ctx.Response.SetBodyRaw(b) // maybe shared with other polls' answers: never written to
}

// idConflict counts and logs (bounded) a sync request of gateway's
// instance the machine refused because another process holds the id.
func (c *Coordinator) idConflict(msg group.Message, what, gateway, instance string) {
	if r, ok := msg.(group.Rejected); ok && r.Code == api.CodeConflict {
		c.metrics.gatewayIDConflicts.Inc()
		c.refusals.Refused(what, "a second gateway process uses one gateway id", zap.String("gateway", gateway), zap.String("instance", instance))
	}
}

// leadershipMark marks the log before a request held by the machine is
// served and returns the check to run before its answer leaves: on the
// Kafka log, for the answers leader.MustConfirm names (the replicas'
// decision, which the simulation runs too), that a transaction begun
// after the mark committed (store.WriteMark: a deposed leader's answers
// rest on the broker's fencing, not on its lease running out); nothing to
// check on badger, which has one writer by construction.
func (c *Coordinator) leadershipMark() func(leader.Answer) error {
	ls, ok := c.store.(interface{ Mark() store.WriteMark })
	if !ok {
		return func(leader.Answer) error { return nil }
	}
	mark := ls.Mark()
	return func(a leader.Answer) error {
		if !leader.MustConfirm(a) {
			return nil
		}
		return mark.Confirm()
	}
}

// syncCaller authenticates a sync-channel request and returns its
// gateway id; false when it answered the refusal.
func (c *Coordinator) syncCaller(ctx *fasthttp.RequestCtx) (string, bool) {
	if !c.channelAuth(ctx, c.cfg.TLS.Sync, c.syncTokens, "sync") {
		return "", false
	}
	gateway := string(ctx.QueryArgs().Peek("gateway"))
	if !ocap.ValidName(gateway) {
		writeError(ctx, api.CodeBadRequest, "gateway: 1-255 printable characters without '/', not . or .. required")
		return "", false
	}
	if !c.syncIdentity(ctx, gateway) {
		return "", false
	}
	return gateway, true
}

// syncInstanceMax bounds the instance argument of the sync channel.
const syncInstanceMax = 64

// syncInstance reads the optional instance nonce of a sync request (""
// when absent); false when it answered the refusal.
func syncInstance(ctx *fasthttp.RequestCtx) (string, bool) {
	raw := ctx.QueryArgs().Peek("instance")
	for _, b := range raw {
		if !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '-' || b == '_') {
			raw = nil
			break
		}
	}
	if len(raw) == 0 && ctx.QueryArgs().Has("instance") || len(raw) > syncInstanceMax {
		writeError(ctx, api.CodeBadRequest, "instance: 1-64 characters [A-Za-z0-9_-] required when present")
		return "", false
	}
	return string(raw), true
}

func (c *Coordinator) syncResponse(r group.SyncReply, ring *api.JWKS) api.SyncResponse {
	return driver.SyncResponse(r, func() []api.JWK { return ring.Keys }, c.settings)
}

// uintArg reads an optional unsigned query argument (0 when absent).
func uintArg(ctx *fasthttp.RequestCtx, name string) (uint64, bool) {
	raw := ctx.QueryArgs().Peek(name)
	if len(raw) == 0 {
		return 0, true
	}
	n, ok := api.ParseDecimal(raw, math.MaxInt64) // one spelling, as every number of the API (api/number.go)
	if !ok {
		writeError(ctx, api.CodeBadRequest, name+" must be a decimal integer in [0, 9223372036854775807] without sign or leading zeros")
		return 0, false
	}
	return uint64(n), true
}
