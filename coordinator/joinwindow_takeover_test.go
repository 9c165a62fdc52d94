package coordinator_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
)

// TestTakeoverInsideTheJoinWindow: a replica's takeover while an empty
// group's join window is open (group/window.go: the window is not in the
// state log). The opener's join, parked at the old leader, and a second
// member, answered there with no grants, were persisted; the new leader
// restores both and assigns the group at once — it does not wait for a
// window it never saw, nor forget the members. The opener's keyed repeat
// at the new leader is answered its member with its share, the second
// member's heartbeats bring it the rest, and each partition has one
// owner. The window is 50 s here, so a group still held at the new
// leader would leave the second member without grants well past the
// 40 s its heartbeats are given (review22).
func TestTakeoverInsideTheJoinWindow(t *testing.T) {
	e := newEnvBrokers(t, map[string]int32{"orders": 4}, 3)
	useKafkaState(t, e)
	e.cfg.Groups.InitialAssignDelay, e.cfg.Groups.InitialAssignDelayMax = 50*time.Second, time.Minute
	s := startReplicas(t, e, 3)
	first := s.awaitLeader(t)
	h := s.harness(first)
	cred := h.clientCredential(t, []string{"g"}, []string{"orders"})
	req := api.JoinRequest{Topics: []string{"orders"}, ClientID: "opener", SessionTimeoutMs: 300_000}
	const key = "c0ffee00-0000-4000-8000-000000000001"

	keyedJoin := func(h *harness) (int, []byte, error) {
		body, _ := json.Marshal(req)
		hr, err := http.NewRequest("POST", h.base+"/v1/groups/g/join", bytes.NewReader(body))
		if err != nil {
			return 0, nil, err
		}
		hr.Header.Set("Authorization", "Bearer "+cred)
		hr.Header.Set("Content-Type", "application/json")
		hr.Header.Set(api.HeaderIdempotencyKey, key)
		resp, err := h.client.Do(hr)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		return resp.StatusCode, out, err
	}
	type answer struct {
		status int
		body   []byte
		err    error
	}
	parked := make(chan answer, 1)
	go func() {
		status, body, err := keyedJoin(h)
		parked <- answer{status, body, err}
	}()
	var opener string
	for deadline := time.Now().Add(30 * time.Second); opener == ""; {
		if status, body, _ := h.do(t, "GET", "/v1/admin/groups/g", e.adminToken, nil); status == 200 {
			var d struct{ Members []struct{ ID string } }
			if json.Unmarshal(body, &d) == nil && len(d.Members) == 1 {
				opener = d.Members[0].ID
			}
		}
		if opener == "" {
			if time.Now().After(deadline) {
				t.Fatal("the opener's join never made its member")
			}
			time.Sleep(10 * time.Millisecond) // polling the admin API for a state, not waiting for an event
		}
	}
	second := h.join(t, "g", cred, api.JoinRequest{Topics: []string{"orders"}, ClientID: "second", SessionTimeoutMs: 300_000})
	if len(second.grants) != 0 {
		t.Fatalf("the second join, inside the window, was answered %d grants", len(second.grants))
	}
	select {
	case a := <-parked:
		t.Fatalf("the opener's join was answered inside the window: %d %s %v", a.status, a.body, a.err)
	default:
	}

	s.stop(t, first)
	a := <-parked
	var old api.JoinResponse
	if a.err == nil && a.status == 200 && json.Unmarshal(a.body, &old) == nil && len(old.Grants) > 0 {
		t.Fatalf("the leader stopping inside the window answered the opener %d grants", len(old.Grants))
	}
	t.Logf("the opener's join at the stopped leader: %d %.200s %v", a.status, a.body, a.err)

	h2 := s.harness(s.awaitLeader(t))
	status, body, err := keyedJoin(h2)
	var repeat api.JoinResponse
	if err != nil || status != 200 || json.Unmarshal(body, &repeat) != nil {
		t.Fatalf("the opener's keyed repeat at the new leader: %d %.300s %v", status, body, err)
	}
	if repeat.MemberID != opener || len(repeat.Grants) != 2 {
		t.Fatalf("the opener's repeat at the new leader: member %s with %d grants, want %s with its 2", repeat.MemberID, len(repeat.Grants), opener)
	}
	second.h = h2
	for deadline := time.Now().Add(40 * time.Second); len(second.grants) < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("the second member holds %d of 2 partitions 40 s after the takeover: the new leader held the group", len(second.grants))
		}
		second.heartbeat(t, 2000)
	}
	owners := map[int32]string{}
	for _, g := range repeat.Grants {
		owners[g.Partition] = opener
	}
	for _, g := range second.grants {
		if owners[g.Partition] != "" {
			t.Fatalf("partition %d granted to both members", g.Partition)
		}
		owners[g.Partition] = second.id
	}
	d := h2.describe(t, "g")
	if len(d.Members) != 2 || len(owners) != 4 {
		t.Fatalf("after the takeover: %d members, %d partitions granted (%v), want 2 and 4", len(d.Members), len(owners), owners)
	}
	for _, p := range d.Partitions {
		if p.State != "owned" || p.Owner != owners[p.Partition] {
			t.Fatalf("partition %d %s by %q, want owned by %q", p.Partition, p.State, p.Owner, owners[p.Partition])
		}
	}
}
