package coordinator_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/capgate/capgate/api"
)

// TestRepeatedReleaseAnsweredDone: a release that landed, repeated after
// its partition moved on (its first answer lost: a frozen replica, a
// hedged attempt answered second), is answered 200 with the offset
// committed — 409 stale_epoch before, so the SDK reported a release that
// had landed as refused. After a restart too (the store keeps the epoch
// of the capability that committed an offset). Another offset at that
// epoch is still stale.
func TestRepeatedReleaseAnsweredDone(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 2})
	e.fill(t, 100)
	h := e.start(t)
	gw := newGateway(h, "gw1")
	gw.run(200)
	creds := h.clientCredential(t, []string{"g"}, []string{"orders"})
	a := h.join(t, "g", creds, api.JoinRequest{ClientID: "a", Topics: []string{"orders"}})
	b := h.join(t, "g", creds, api.JoinRequest{ClientID: "b", Topics: []string{"orders"}})
	revoke := a.heartbeat(t, 1000).Revoke
	if len(revoke) != 1 {
		t.Fatalf("revokes %+v, want 1", revoke)
	}
	r := revoke[0]
	release := func(offset int64) (int, []byte) { return a.commit(t, r.Topic, r.Partition, offset, true) }
	if status, body := release(50); status != http.StatusOK {
		t.Fatalf("release: %d %s", status, body)
	}
	b.awaitGrant(t, r)
	repeat := func(when string) {
		t.Helper()
		status, body := release(50)
		repeatedDone(t, when, status, body)
	}
	repeat("after the move")
	if status, body := release(51); status != http.StatusConflict || errorCode(t, body) != api.CodeStaleEpoch {
		t.Fatalf("another offset at the old epoch: %d %s, want 409 stale_epoch", status, body)
	}
	gw.halt()
	h.stop(t)
	h = e.start(t)
	gw.h, a.h, b.h = h, h, h
	gw.run(200)
	defer gw.halt()
	repeat("after a restart")
}

// pureReleaseMoved sets up a release without an offset that landed: a
// commits 50 on both partitions of orders and rejoins (a restarted
// process: its partitions come back under fresh epochs, the offsets
// stay committed under the old ones), b joins, a releases the partition
// moving to b with offset -1 (it read nothing since), and b gets it. It
// returns the release (its answer is what a lost answer's repeat gets).
func pureReleaseMoved(t *testing.T, h *harness, creds string) (release func(*harness) (int, []byte)) {
	t.Helper()
	join := api.JoinRequest{ClientID: "a", Topics: []string{"orders"}, SessionTimeoutMs: 300_000}
	a := h.join(t, "g", creds, join)
	settle(t, h, []*member{a}, []int{2}, nil)
	for p := range int32(2) {
		if status, body := a.commit(t, "orders", p, 50, false); status != http.StatusOK {
			t.Fatalf("commit: %d %s", status, body)
		}
	}
	rejoin := join
	rejoin.MemberID = a.id
	fenced := a.grants
	a = h.join(t, "g", creds, rejoin) // the rejoin is the old epochs' release
	eventually(t, func() string {
		a.heartbeat(t, 50)
		for p := range int32(2) {
			g, ok := a.grant("orders", p)
			if !ok || g.Epoch <= fenced[partitionKey("orders", p)].Epoch {
				return fmt.Sprintf("a holds no grant of orders/%d above the fenced epoch yet", p)
			}
		}
		return ""
	})
	b := h.join(t, "g", creds, api.JoinRequest{ClientID: "b", Topics: []string{"orders"}, SessionTimeoutMs: 300_000})
	var r api.PartitionRef
	eventually(t, func() string {
		if revoke := a.heartbeat(t, 200).Revoke; len(revoke) == 1 {
			r = revoke[0]
			return ""
		}
		return "a was told to revoke no partition yet"
	})
	release = func(h *harness) (int, []byte) {
		a.h = h
		return a.commit(t, r.Topic, r.Partition, -1, true)
	}
	if status, body := release(h); status != http.StatusOK {
		t.Fatalf("the release without an offset: %d %s", status, body)
	}
	b.awaitGrant(t, r)
	return release
}

// repeatedDone checks a repeated release is answered 200 with offset 50
// committed.
func repeatedDone(t *testing.T, when string, status int, body []byte) {
	t.Helper()
	var resp api.CommitResponse
	if status != http.StatusOK {
		t.Fatalf("%s: the repeated release: %d %s, want 200", when, status, body)
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		t.Fatal(err)
	}
	if len(resp.Committed) != 1 || resp.Committed[0].Offset != 50 {
		t.Fatalf("%s: answered %s, want offset 50 committed", when, body)
	}
}

// TestRepeatedPureReleaseAnsweredDone: a release without an offset that
// landed, repeated after its partition moved on, is answered 200 — 409
// stale_epoch before, where a repeated release with an offset was 200.
// After a restart on badger too: the release keeps the offset standing
// under its epoch (the offset's stored epoch). Fails without.
func TestRepeatedPureReleaseAnsweredDone(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 2})
	e.fill(t, 100)
	h := e.start(t)
	gw := newGateway(h, "gw1")
	gw.run(200)
	release := pureReleaseMoved(t, h, h.clientCredential(t, []string{"g"}, []string{"orders"}))
	status, body := release(h)
	repeatedDone(t, "after the move", status, body)
	gw.halt()
	h.stop(t)
	h = e.start(t)
	gw.h = h
	gw.run(200)
	defer gw.halt()
	status, body = release(h)
	repeatedDone(t, "after a restart", status, body)
}

// TestRepeatedPureReleaseDoneAfterATakeover: the same through a leader
// change — three replicas on a Kafka state log, the leader stopped after
// the release landed: the repeat sent to the replica that took over is
// answered 200 (it read the release's epoch from the log). Fails without
// (409 stale_epoch).
func TestRepeatedPureReleaseDoneAfterATakeover(t *testing.T) {
	e := newEnvBrokers(t, map[string]int32{"orders": 2}, 3)
	e.fill(t, 100)
	useKafkaState(t, e)
	s := startReplicas(t, e, 3)
	first := s.awaitLeader(t)
	h := s.harness(first)
	release := pureReleaseMoved(t, h, h.clientCredential(t, []string{"g"}, []string{"orders"}))
	s.stop(t, first)
	second := s.awaitLeader(t)
	status, body := release(s.harness(second))
	repeatedDone(t, "after the takeover", status, body)
}

// awaitGrant heartbeats until m holds a grant of r.
func (m *member) awaitGrant(t *testing.T, r api.PartitionRef) {
	t.Helper()
	eventually(t, func() string {
		m.heartbeat(t, 200)
		if _, ok := m.grant(r.Topic, r.Partition); !ok {
			return fmt.Sprintf("%s holds no grant of %s/%d yet", m.id, r.Topic, r.Partition)
		}
		return ""
	})
}
