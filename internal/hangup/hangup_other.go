//go:build !unix

package hangup

import "net"

// Watch does not watch on this platform: an abandoned long poll
// holds its broker connection until its max_wait.
func Watch(net.Conn, func()) (stop func()) { return func() {} }
