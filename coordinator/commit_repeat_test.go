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
	eventually(t, func() string {
		b.heartbeat(t, 200)
		if _, ok := b.grant(r.Topic, r.Partition); !ok {
			return fmt.Sprintf("b holds no grant of %s/%d yet", r.Topic, r.Partition)
		}
		return ""
	})
	repeat := func(when string) {
		t.Helper()
		status, body := release(50)
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
