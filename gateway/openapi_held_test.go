package gateway

import (
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/internal/answerheld/answerheldtest"
)

// TestUnreadOpenAPIAnswersShareOneCopy: GET /openapi.json needs no token
// and its answer is ~190 KB, copied into each connection's response
// before, so anyone opening connections that ask for it and read nothing
// made the gateway hold ~190 KB each until write_timeout —
// max_connections_per_address (2,000): ~380 MB from one address
// (redteam15 #2). The document is one slice handed to every answer
// uncopied: 48 unread answers add under half a copy each to the live
// heap. Fails without (SetBody: ~9 MB).
func TestUnreadOpenAPIAnswersShareOneCopy(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.WriteTimeout = 2 * time.Minute })
	document := len(api.OpenAPIJSON())
	unread := func() { answerheldtest.Unread(t, h.gw.Addr(), "GET /openapi.json HTTP/1.1\r\nHost: gw\r\n\r\n") }
	unread() // fasthttp's pools warmed by one
	const readers = 48
	before := answerheldtest.LiveHeap()
	for range readers {
		unread()
	}
	if grown := answerheldtest.LiveHeap() - before; grown > readers*int64(document)/2 {
		t.Fatalf("%d unread answers of the %d-byte document grew the live heap by %d bytes (%d each), want under half a copy each",
			readers, document, grown, grown/readers)
	}
}
