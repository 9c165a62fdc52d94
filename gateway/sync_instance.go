package gateway

import (
	"crypto/rand"
	"encoding/base64"
	"sync/atomic"

	"go.uber.org/zap"
)

// syncIdentity is who this gateway process is on the sync channel: its
// id (gateway.id, or the one derived per process: Config.GatewayID) and
// an instance nonce drawn at start, sent with every poll and leave so
// that the coordinator refuses a second process polling under the same
// id (409 conflict; coordinator/group/gateways.go) instead of counting
// its acknowledgements and leave for the first. refused is the
// coordinator's conflict message while the last poll was refused so
// (nil otherwise): /readyz answers 503 with it. failed is the last
// poll's error while polls fail (nil once one is applied): /readyz names
// it while the gateway is not ready or out of sync.
type syncIdentity struct {
	id       string
	instance string
	refused  atomic.Pointer[string]
	failed   atomic.Pointer[string]
}

// newSyncIdentity draws this process's instance nonce for id.
func newSyncIdentity(id string) *syncIdentity {
	var nonce [16]byte
	_, _ = rand.Read(nonce[:]) // never fails (crypto/rand)
	return &syncIdentity{id: id, instance: base64.RawURLEncoding.EncodeToString(nonce[:])}
}

// noteRefused records the outcome of a poll: err a *conflictError, or
// nil after a poll the coordinator served. It logs the conflict at
// ERROR when it begins and at INFO when it ends.
func (g *Gateway) noteRefused(err *conflictError) {
	id := g.sync
	if err == nil {
		if id.refused.Swap(nil) != nil {
			g.log.Info("sync: the coordinator accepts this gateway's id again", zap.String("gateway", id.id))
		}
		return
	}
	msg := err.Error()
	if id.refused.Swap(&msg) == nil {
		g.log.Error("not ready: another gateway process syncs under this gateway id; set a distinct gateway.id (CAPGATE_GATEWAY_ID) for each gateway, or leave it unset to derive one from the host name and listen port",
			zap.String("gateway", id.id), zap.String("instance", id.instance), zap.Error(err))
	}
}

// refusedReason is the coordinator's conflict message while it refuses
// this gateway's id ("" otherwise).
func (g *Gateway) refusedReason() string {
	if p := g.sync.refused.Load(); p != nil {
		return *p
	}
	return ""
}

// conflictError is a 409 conflict answer to a sync poll: another gateway
// process holds this gateway's id.
type conflictError struct {
	base, message string
}

func (e *conflictError) Error() string {
	return "sync: " + e.base + " refused this gateway's id: " + e.message
}
