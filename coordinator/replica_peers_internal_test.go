package coordinator

import (
	"slices"
	"testing"
)

// TestOtherPeersLeaveThisReplicaOut: a console links to the replicas of
// replica.peers but its own (the list every replica is given holds it),
// as origins: a trailing slash or the default advertise URL (http:// and
// the listen address) still names this replica.
func TestOtherPeersLeaveThisReplicaOut(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Listen = "10.0.0.1:7070"
	cfg.Replica.Peers = []string{"http://10.0.0.1:7070/", "http://10.0.0.2:7070", "https://c3.internal:7070"}
	if got, want := cfg.otherPeers(), []string{"http://10.0.0.2:7070", "https://c3.internal:7070"}; !slices.Equal(got, want) {
		t.Fatalf("default advertise: %q, want %q", got, want)
	}
	cfg.Replica.Advertise = "https://c3.internal:7070"
	if got, want := cfg.otherPeers(), []string{"http://10.0.0.1:7070", "http://10.0.0.2:7070"}; !slices.Equal(got, want) {
		t.Fatalf("advertise c3: %q, want %q", got, want)
	}
	cfg.Replica.Peers = nil
	if got := cfg.otherPeers(); len(got) != 0 {
		t.Fatalf("no peers: %q", got)
	}
}
