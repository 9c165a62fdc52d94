package coordinator

// Behavior: POST /v1/sync/leave?gateway={id} — the same authentication as
// GET /v1/sync (the sync token and/or a gateway client certificate, as
// tls.sync says, the id bound to the certificate under
// tls.sync_bind_identity; 401/403 otherwise, and nothing changes). A gateway calls
// it when it shuts down, after it stopped serving: the coordinator
// forgets the gateway at once (its record is deleted), so handoffs and
// admin revokes stop waiting for its acknowledgements instead of waiting
// groups.gateway_timeout for its silence. Answers 200 {} — also for a
// gateway it does not know (leaving twice is harmless). A later poll with
// the same id registers the gateway again, as new (a reset snapshot).
// With instance (as GET /v1/sync), a leave from another process than the
// one holding the id answers 409 conflict and changes nothing; without
// it the id's holder is forgotten whoever it is. No body is read.

import (
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/capgate/capgate/coordinator/group"
)

func (c *Coordinator) handleSyncLeave(ctx *fasthttp.RequestCtx, _ []string) {
	gateway, ok := c.syncCaller(ctx)
	if !ok {
		return
	}
	instance, ok := syncInstance(ctx)
	if !ok {
		return
	}
	msg, err := c.call(func(ref group.Ref) group.Event {
		return group.GatewayLeave{Ref: ref, Gateway: gateway, Instance: instance}
	})
	if _, ok := msg.(group.Done); !ok {
		c.idConflict(msg, "sync leave", gateway, instance)
		writeMachineError(ctx, msg, err)
		return
	}
	c.log.Info("gateway left", zap.String("gateway", gateway))
	writeJSON(ctx, fasthttp.StatusOK, struct{}{})
}
