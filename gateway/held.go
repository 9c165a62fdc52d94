package gateway

import (
	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/internal/answerheld"
)

// heldBytes bounds the answer bytes the gateway holds while they are
// written to their clients (internal/answerheld): in all (max) and per
// holder (maxPerHolder, the root of a capability's chain, as the
// in-flight caps count). Without it, a holder opening many connections,
// each fetching max_fetch_bytes and reading none of it, made the gateway
// hold connections × max_fetch_bytes (the in-flight caps end when the
// handler returns, before the write).
type heldBytes struct{ *answerheld.Counter }

// heldMin is the smallest answer counted: the raw answers handed to
// fasthttp uncopied start there, and JSON answers that large are handed
// over the same way.
const heldMin = rawStreamMin

func newHeldBytes(max, maxPerHolder int64) *heldBytes {
	return &heldBytes{answerheld.New(max, maxPerHolder)}
}

// take counts n bytes for holder, or refuses them with
// api.CodeOverloaded (the gateway holds max) or api.CodeTooManyFetches
// (the holder holds maxPerHolder), counting nothing.
func (h *heldBytes) take(holder string, n int64) api.Code {
	switch h.Take(holder, n) {
	case answerheld.OverHolder:
		return api.CodeTooManyFetches
	case answerheld.OverAll:
		return api.CodeOverloaded
	}
	return ""
}

// full is take's refusal of any answer for holder now, "" while there
// is room.
func (h *heldBytes) full(holder string) api.Code {
	switch h.Full(holder) {
	case answerheld.OverHolder:
		return api.CodeTooManyFetches
	case answerheld.OverAll:
		return api.CodeOverloaded
	}
	return ""
}

// give returns n bytes of holder's that take counted.
func (h *heldBytes) give(holder string, n int64) { h.Give(holder, n) }

// held is the number of answer bytes counted now.
func (h *heldBytes) held() int64 { return h.Held() }
