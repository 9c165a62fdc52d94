//go:build !unix

package gateway

import "net"

// watchHangup does not watch on this platform: an abandoned long poll
// holds its broker connection until its max_wait.
func watchHangup(net.Conn, func()) (stop func()) { return func() {} }
