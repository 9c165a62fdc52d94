package connguard

import (
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/internal/linger"
)

// Bounds of a refused connection's lingering close (its count shares
// internal/linger's MaxConns).
const (
	lingerTimeout = 250 * time.Millisecond
	lingerBytes   = 16 << 10
)

// refuse writes answer to c and closes it, lingering when it can.
func refuse(c net.Conn, answer []byte) {
	if len(answer) == 0 {
		c.Close()
		return
	}
	_ = c.SetWriteDeadline(time.Now().Add(lingerTimeout))
	if _, err := c.Write(answer); err != nil {
		c.Close()
		return
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	if !linger.Drain(c, lingerTimeout, lingerBytes) {
		c.Close()
	}
}

// HTTPAnswer is a whole HTTP/1.1 response: status, a JSON body,
// Retry-After: 1 and Connection: close.
func HTTPAnswer(status int, jsonBody []byte) []byte {
	return fmt.Appendf(nil, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nRetry-After: 1\r\nCache-Control: no-store\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
		status, http.StatusText(status), len(jsonBody), jsonBody)
}

// OverloadedAnswers is Config.Answer for a capgate server (who: "the
// gateway", "the coordinator"): 503 overloaded in the API's JSON error
// body, naming the setting whose bound was met.
func OverloadedAnswers(who string, maxConnections, maxPerAddress int) func(Refusal) []byte {
	return func(r Refusal) []byte {
		message := fmt.Sprintf("%s serves max_connections (%d) HTTP connections at once: retry", who, maxConnections)
		details := map[string]any{"limit": "max_connections", "max_connections": maxConnections}
		if r == RefusedPerAddress {
			message = fmt.Sprintf("this address holds max_connections_per_address (%d) HTTP connections to %s: close idle ones, or retry", maxPerAddress, who)
			details = map[string]any{"limit": "max_connections_per_address", "max_connections_per_address": maxPerAddress}
		}
		return HTTPAnswer(http.StatusServiceUnavailable, api.EncodeError(api.CodeOverloaded, message, details))
	}
}
