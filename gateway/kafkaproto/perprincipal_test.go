package kafkaproto

import (
	"net"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestConnectionsPerPrincipalAreBounded is the attack of one tenant
// holding every kafka_max_connections slot with authenticated
// connections (the oldest unauthenticated one gives way to a new one, an
// authenticated one never does): its connection beyond
// max_connections_per_principal (2 here) is refused at SASL
// (SASL_AUTHENTICATION_FAILED naming the setting, closed); once one of
// its connections closes, it authenticates again; re-authenticating an
// open connection does not count twice.
func TestConnectionsPerPrincipalAreBounded(t *testing.T) {
	cfg := testConfig()
	cfg.MaxConnectionsPerPrincipal = 2
	s := startListener(t, cfg, acceptToken("good"), nil)
	// authenticate opens a connection and authenticates it with the good
	// token: the SASL error and its message.
	authenticate := func(r *testConn) (int16, string) {
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.SetVersion(1)
		hs.Mechanism = "PLAIN"
		if _, err := r.roundTrip(hs); err != nil {
			t.Fatal(err)
		}
		auth := kmsg.NewPtrSASLAuthenticateRequest()
		auth.SetVersion(2)
		auth.SASLAuthBytes = []byte("\x00capgate\x00good")
		resp, err := r.roundTrip(auth)
		if err != nil {
			t.Fatal(err)
		}
		a := resp.(*kmsg.SASLAuthenticateResponse)
		msg := ""
		if a.ErrorMessage != nil {
			msg = *a.ErrorMessage
		}
		return a.ErrorCode, msg
	}
	open := func() *testConn {
		nc, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		return &testConn{t: t, nc: nc}
	}
	first, second := open(), open()
	for i, r := range []*testConn{first, second} {
		if code, msg := authenticate(r); code != 0 {
			t.Fatalf("connection %d: SASL error %d %q", i+1, code, msg)
		}
	}
	if code, msg := authenticate(first); code != 0 { // KIP-368 re-authentication: the same connection
		t.Fatalf("re-authentication of a counted connection: %d %q", code, msg)
	}
	third := open()
	code, msg := authenticate(third)
	if code != kerr.SaslAuthenticationFailed.Code || !strings.Contains(msg, "kafka_max_connections_per_principal") || !third.closed() {
		t.Fatalf("a third connection of one identity, bound 2: SASL error %d %q, closed %v; want SASL_AUTHENTICATION_FAILED naming the bound, closed", code, msg, third.closed())
	}
	// The server uncounts a connection when its goroutine sees it closed:
	// a few round trips of refused attempts, at most, then a place again.
	first.nc.Close()
	for i := 0; ; i++ {
		if code, _ := authenticate(open()); code == 0 {
			break
		}
		if i == 200 {
			t.Fatal("the identity never got its place back after one of its connections closed")
		}
	}
}
