package gateway

import (
	"sync"

	"github.com/capgate/capgate/api"
)

// heldBytes bounds the answer bytes the gateway holds while they are
// written to their clients: in all (max) and per holder (maxPerHolder,
// the root of a capability's chain, as the in-flight caps count). An
// answer stays in the gateway's memory until the client has read all but
// what the socket buffers hold, up to write_timeout; without a bound, a
// holder opening many connections, each fetching max_fetch_bytes and
// reading none of it, made the gateway hold connections × max_fetch_bytes
// (the in-flight caps end when the handler returns, before the write).
//
// Only answers of at least heldMin bytes are counted (smaller ones are
// copied into fasthttp's own buffers and cost the hot path nothing). As
// Kafka serves the first batch whole, an answer is let through when
// nothing is held (in all, or for its holder) even if it alone is larger
// than the cap.
type heldBytes struct {
	max, maxPerHolder int64

	mu       sync.Mutex
	total    int64
	byHolder map[string]int64
}

// heldMin is the smallest answer counted: the raw answers handed to
// fasthttp uncopied start there, and JSON answers that large are handed
// over the same way.
const heldMin = rawStreamMin

func newHeldBytes(max, maxPerHolder int64) *heldBytes {
	return &heldBytes{max: max, maxPerHolder: maxPerHolder, byHolder: map[string]int64{}}
}

// take counts n bytes for holder, or refuses them with
// api.CodeOverloaded (the gateway holds max) or api.CodeTooManyFetches
// (the holder holds maxPerHolder), counting nothing.
func (h *heldBytes) take(holder string, n int64) api.Code {
	h.mu.Lock()
	defer h.mu.Unlock()
	mine := h.byHolder[holder]
	switch {
	case mine > 0 && mine+n > h.maxPerHolder:
		return api.CodeTooManyFetches
	case h.total > 0 && h.total+n > h.max:
		return api.CodeOverloaded
	}
	h.total += n
	h.byHolder[holder] = mine + n
	return ""
}

// give returns n bytes of holder's that take counted.
func (h *heldBytes) give(holder string, n int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.total -= n
	if h.byHolder[holder] -= n; h.byHolder[holder] <= 0 {
		delete(h.byHolder, holder)
	}
}

// held is the number of answer bytes counted now.
func (h *heldBytes) held() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.total
}
