package client

import (
	"bufio"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/capgate/capgate/internal/coordinators/coordinatorstest"
)

// TestLeaderTransportTriesEveryReplicaInOneCall: with the first two
// replicas refusing connections, one POST reaches the third, body and
// bearer sent once; with all of them refusing, the error names every URL
// tried and why.
func TestLeaderTransportTriesEveryReplicaInOneCall(t *testing.T) {
	dead1, dead2 := coordinatorstest.Down(t), coordinatorstest.Down(t)
	leader, led := echo(t)
	hc, err := WithCoordinators(http.DefaultClient, []string{dead1, dead2, leader.URL})
	if err != nil {
		t.Fatal(err)
	}
	status, got := post(t, hc, dead1+"/v1/admin/capabilities", `{"n":1}`)
	if status != 200 || got != `/v1/admin/capabilities {"n":1} Bearer member-token` || led.Load() != 1 {
		t.Fatalf("one call: %d %q, leader asked %d times; want 200 from the third URL, once", status, got, led.Load())
	}

	hc, err = WithCoordinators(http.DefaultClient, []string{dead1, dead2})
	if err != nil {
		t.Fatal(err)
	}
	status, msg := post(t, hc, dead1+"/v1/admin/groups", "")
	if status != 0 {
		t.Fatalf("status %d with no replica listening", status)
	}
	for _, want := range []string{"no coordinator replica reachable", dead1 + ": ", dead2 + ": ", "connection refused"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q: %s", want, msg)
		}
	}
}

// TestLeaderTransportNeverResendsWhatMayHaveArrived: a replica that
// accepts the connection, reads the request and hangs up without an
// answer may have acted on it; the POST is not sent to the next replica
// (the caller decides), and a later call goes there.
func TestLeaderTransportNeverResendsWhatMayHaveArrived(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var read atomic.Int64
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			if _, err := http.ReadRequest(bufio.NewReader(conn)); err == nil {
				read.Add(1)
			}
			conn.Close()
		}
	}()
	hangsUp := "http://" + ln.Addr().String()
	leader, led := echo(t)
	hc, err := WithCoordinators(http.DefaultClient, []string{hangsUp, leader.URL})
	if err != nil {
		t.Fatal(err)
	}
	if status, msg := post(t, hc, hangsUp+"/v1/admin/groups/g/partitions/t/0/revoke", `{"reason":"x"}`); status != 0 || led.Load() != 0 {
		t.Fatalf("the POST read by a replica that hung up: %d %q, and sent on to the next %d times; want an error and 0", status, msg, led.Load())
	}
	if read.Load() != 1 {
		t.Fatalf("the first replica read %d requests, want 1", read.Load())
	}
	if status, _ := post(t, hc, hangsUp+"/v1/admin/groups", ""); status != 200 || led.Load() != 1 {
		t.Fatalf("the next call: %d, leader asked %d times", status, led.Load())
	}
}
