// Package bodyheldtest sends the headers of large requests without their
// bodies, for the tests of the servers that count the bodies they read
// at once (internal/bodyheld).
package bodyheldtest

import (
	"bufio"
	"net"
	"net/http"
	"testing"
	"time"
)

// Heads opens n connections to addr, sends head (a request's line and
// headers, announcing a body) on each and never the body. It waits for
// want of them to be answered and returns those answers' statuses (it
// fails t when they do not come within 10 s); closing the connections
// is close's.
func Heads(t testing.TB, addr, head string, n, want int) (statuses []int, close func()) {
	t.Helper()
	answers := make(chan int, n)
	var conns []net.Conn
	close = func() {
		for _, c := range conns {
			c.Close()
		}
	}
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			close()
			t.Fatal(err)
		}
		conns = append(conns, c)
		if _, err := c.Write([]byte(head)); err != nil {
			close()
			t.Fatal(err)
		}
		go func() {
			r, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				return // held until the connection closes
			}
			answers <- r.StatusCode
		}()
	}
	deadline := time.After(10 * time.Second)
	for range want {
		select {
		case status := <-answers:
			statuses = append(statuses, status)
		case <-deadline:
			close()
			t.Fatalf("%d of %d requests announcing a body answered within 10 s, want %d: the server waits for every body", len(statuses), n, want)
		}
	}
	return statuses, close
}
