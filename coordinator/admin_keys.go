package coordinator

// Behavior: POST /v1/admin/keys/rotate — bearer: an admin token; no body.
// Rotates the signing key ring: the next key (already published to the
// gateways) starts signing, the current one becomes previous (tokens it
// signed still verify until the next rotation retires it), a new next key
// is made. The ring is stored durably before it is used, then the machine
// queues a key change so every gateway's next sync reply carries the new
// key set (also served at /.well-known/jwks.json). Answers KeysResponse.

import (
	"errors"

	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
)

func (c *Coordinator) handleAdminKeysRotate(ctx *fasthttp.RequestCtx, _ []string) {
	ids, err := c.rotateKeys()
	switch {
	case errors.Is(err, errUnavailable):
		writeMachineError(ctx, nil, err)
	case err != nil:
		writeError(ctx, api.CodeInternal, "rotate keys: store refused the new ring")
	default:
		writeJSON(ctx, fasthttp.StatusOK, KeysResponse{Current: ids.Current, Next: ids.Next, Previous: ids.Previous})
	}
}
