package clientaddr

import (
	"bytes"
	"net/netip"

	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/internal/failguard"
)

// Request is the client address of a fasthttp request (Client of its
// connection's peer and its X-Forwarded-For lines). The header is read
// only when the peer is trusted, and only from the header section as
// received: a trailer (a chunked body's, announced by Trailer:) is never
// read, since it comes after the header every proxy appends to and could
// carry a hop right of the proxy's own. Callers ask for it when they need
// it (a failed or uncached token check), not on every request: with
// trusted proxies it re-reads the header block.
func (p Proxies) Request(ctx *fasthttp.RequestCtx) netip.Addr {
	peer := failguard.Addr(ctx.RemoteAddr())
	if !p.Trusts(peer) {
		return peer.Unmap()
	}
	// The last HopsMax lines: each holds a hop at least, so the walk
	// never reaches an earlier one.
	var kept [HopsMax][]byte
	n := 0
	for key, value := range ctx.Request.Header.AllInOrder() {
		if !bytes.EqualFold(key, headerName) {
			continue
		}
		if n == len(kept) {
			copy(kept[:], kept[1:])
			n--
		}
		kept[n] = value
		n++
	}
	return p.Client(peer, kept[:n])
}

var headerName = []byte(Header)
