package kafkaproto

import (
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// dialFrom connects to s from the loopback address ip (127.0.0.0/8 is
// all loopback on Linux): a client at an address of its own.
func dialFrom(t *testing.T, s *Server, ip string) (*testConn, error) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	nc, err := d.Dial("tcp", s.Addr())
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { nc.Close() })
	return &testConn{t: t, nc: nc}, nil
}

// churn opens n connections to s from ip, each sending an ApiVersions
// and kept open: how many were answered (held a slot when their answer
// was written). Every one is registered (or refused) before churn
// returns, so every eviction it caused has happened.
func churn(t *testing.T, s *Server, ip string, n int) int {
	t.Helper()
	answered := 0
	for range n {
		r, err := dialFrom(t, s, ip)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.roundTrip(kmsg.NewPtrApiVersionsRequest()); err == nil {
			answered++
		}
	}
	return answered
}

// TestConnectionChurnDoesNotEvictHandshakes is redteam7 #3, the attack
// as its test: addresses that keep opening connections and send nothing
// do not push out a client still between connect and SaslAuthenticate.
// One address holds at most kafka_max_connections_per_address (the rest
// closed at accept: without the bound each new one was answered, taking
// the place of the address's own oldest); and with the listener full of
// several addresses' silent connections, a new one takes the place of
// the oldest of the address holding the most — without that order,
// of the oldest of all: the client handshaking since before the churn.
func TestConnectionChurnDoesNotEvictHandshakes(t *testing.T) {
	table, tokens := mintCapabilities(t, 1)
	cfg := testConfig()
	cfg.MaxConnections, cfg.MaxConnectionsPerAddress = 8, 4
	s := startListener(t, cfg, table, nil)
	victim, err := dialFrom(t, s, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = "PLAIN"
	if _, err := victim.roundTrip(hs); err != nil { // handshaking: one round trip to go
		t.Fatal(err)
	}
	if n := churn(t, s, "127.0.0.2", 50); n != cfg.MaxConnectionsPerAddress {
		t.Fatalf("50 silent connections from one address: %d answered, want kafka_max_connections_per_address (%d), the rest closed at accept", n, cfg.MaxConnectionsPerAddress)
	}
	churn(t, s, "127.0.0.3", 50) // the listener is full now: new ones take silent ones' places
	churn(t, s, "127.0.0.4", 50)
	if n := s.Connections(); n != cfg.MaxConnections {
		t.Fatalf("%d connections open, want the listener full (%d)", n, cfg.MaxConnections)
	}
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.SetVersion(2)
	auth.SASLAuthBytes = []byte("\x00user\x00" + tokens[0])
	resp, err := victim.roundTrip(auth)
	if err != nil {
		t.Fatalf("the client handshaking since before the churn: %v, want it authenticated (it was evicted for a silent connection)", err)
	}
	if code := resp.(*kmsg.SASLAuthenticateResponse).ErrorCode; code != 0 {
		t.Fatalf("SaslAuthenticate: error %d", code)
	}
	if s.Evicted() == 0 || s.Refused(int(limitPerAddress)) == 0 {
		t.Fatalf("evicted %d, refused per address %d: want both counted", s.Evicted(), s.Refused(int(limitPerAddress)))
	}
}
