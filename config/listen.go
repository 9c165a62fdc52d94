package config

import (
	"fmt"
	"net/url"
	"strconv"
)

// ListenHint is what to write for value, a listen address that is not
// host:port, when it can tell: a port alone (8080) or a URL
// (http://127.0.0.1:7070) — "must be host:port" alone left the fix to the
// reader. "" otherwise.
func ListenHint(value string) string {
	if u, err := url.Parse(value); err == nil && u.Scheme != "" && u.Host != "" {
		return ": an address, not a URL: write " + u.Host
	}
	if port, err := strconv.Atoi(value); err == nil && port >= 0 && port <= 65535 {
		return fmt.Sprintf(": write 127.0.0.1:%d (this machine only) or :%d (every interface)", port, port)
	}
	return ""
}
