package coordinatorstest

import (
	"net"
	"testing"
)

// Down is the URL of a replica that is down: a loopback port listened
// on, then closed, so a connection to it is refused (nothing is sent).
func Down(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close()
	return url
}
