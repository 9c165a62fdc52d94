package coordinatorstest

import (
	"net"
	"strconv"
	"syscall"
	"testing"
)

// Down is the URL of a replica that is down: a connection to it is
// refused (nothing is sent). The port is a TCP socket bound on loopback
// and never listened on, kept open until the test ends, so the port
// stays this test's: a port listened on and closed (as before) could be
// handed out again — two Downs of one test once got the same port, and
// another process may take it.
func Down(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	in4, ok := sa.(*syscall.SockaddrInet4)
	if !ok {
		t.Fatalf("bound to %T", sa)
	}
	return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(in4.Port))
}
