package harness

import "github.com/capgate/capgate/internal/stack"

// Proxy is a TCP proxy on 127.0.0.1 that a test can blackhole (see
// stack.Proxy: the one proxy of the process launcher).
type Proxy = stack.Proxy

// StartProxy listens on 127.0.0.1:0 and forwards to target (host:port).
func StartProxy(target string) (*Proxy, error) { return stack.StartProxy(target) }
