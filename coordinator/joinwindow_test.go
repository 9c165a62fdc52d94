package coordinator_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/group"
)

// TestJoinStormIsAssignedOnce: 20 members join an empty group of 200
// partitions at once, with the join window on (group/window.go): the
// first join's answer waits for the window and carries its share, the
// others are answered at once and get theirs in heartbeats. Every
// partition's capability is minted once — grants_total is 200, every
// epoch is 1, no member is ever revoked — where without the window the
// first member is granted all 200 in its answer and ~190 of them move
// again (revoke, release, fence, regrant). The window's quiet time is
// 2 s here so a loaded machine's joins still fall inside it; the test
// waits on the members' held heartbeats, never on a sleep.
func TestJoinStormIsAssignedOnce(t *testing.T) {
	const members, partitions = 20, 200
	e := newEnv(t, map[string]int32{"orders": partitions})
	e.cfg.Groups.InitialAssignDelay, e.cfg.Groups.InitialAssignDelayMax = 2*time.Second, 30*time.Second
	h := e.start(t)
	cred := h.clientCredential(t, []string{"g"}, []string{"orders"})
	answers := make([]api.JoinResponse, members)
	errs := make([]error, members)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, body, _, err := h.try("POST", "/v1/groups/g/join", cred, api.JoinRequest{Topics: []string{"orders"}, SessionTimeoutMs: 60_000})
			if err == nil && status != 200 {
				err = fmt.Errorf("join: %d %s", status, body)
			}
			if err == nil {
				err = json.Unmarshal(body, &answers[i])
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	joined := make([]*member, members)
	granted := 0 // in join answers: only the first join's, when the window closed
	for i, a := range answers {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if n := len(a.Grants); n != 0 && n != partitions/members {
			t.Fatalf("member %s was granted %d partitions in its join answer, want 0 or its share", a.MemberID, n)
		}
		granted += len(a.Grants)
		e.remember(a.MemberToken)
		joined[i] = &member{h: h, group: "g", id: a.MemberID, token: a.MemberToken, grants: map[string]api.Grant{}}
		joined[i].apply(nil, a.Grants, nil)
	}
	if granted > partitions/members {
		t.Fatalf("join answers granted %d partitions: more than the first join's share", granted)
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, m := range joined {
		for len(m.grants) < partitions/members {
			if time.Now().After(deadline) {
				t.Fatalf("member %s holds %d partitions after 60 s", m.id, len(m.grants))
			}
			if hb := m.heartbeat(t, 2000); len(hb.Revoke) > 0 {
				t.Fatalf("member %s was revoked %v: the storm was assigned more than once", m.id, hb.Revoke)
			}
		}
	}
	for _, p := range h.describe(t, "g").Partitions {
		if p.State != "owned" || p.Epoch != 1 {
			t.Fatalf("partition %s/%d %s at epoch %d, want owned at 1", p.Topic, p.Partition, p.State, p.Epoch)
		}
	}
	if n := h.metric(t, "capgate_coordinator_grants_total"); n != partitions {
		t.Fatalf("%v grants minted for %d partitions, want each once", n, partitions)
	}
}

// TestFirstAssignmentGrantsSpendTheTenantsRate: the window moves an empty
// group's first grants from the join answers of all but the first member
// to their heartbeats, so a heartbeat pays for the grants it answers as a
// join does (review21's join–leave amplification): two groups' first
// assignments of 64 partitions to two members spend 128 of a burst of
// 100, and the tenant's third first join waits out its debt (429 past
// the wait). Fails without the heartbeat's charge: the second members'
// joins mint nothing and spend nothing, 64 are charged, and the third is
// admitted.
func TestFirstAssignmentGrantsSpendTheTenantsRate(t *testing.T) {
	e := newEnv(t, map[string]int32{"big": 64})
	e.cfg.TenantMemberRate, e.cfg.TenantMemberBurst = 0.001, 100 // a token every 1,000 s
	// A quiet time a loaded machine's second join surely falls inside.
	e.cfg.Groups.InitialAssignDelay, e.cfg.Groups.InitialAssignDelayMax = 2*time.Second, 20*time.Second
	h := e.start(t)
	cred := h.clientCredential(t, []string{"ga-0", "ga-1", "ga-2"}, []string{"big"})
	req := api.JoinRequest{SessionTimeoutMs: 300_000, Topics: []string{"big"}}
	for i := range 2 {
		group := fmt.Sprintf("ga-%d", i)
		first := make(chan api.JoinResponse, 1)
		go func() {
			var out api.JoinResponse
			if status, body, _, err := h.try("POST", "/v1/groups/"+group+"/join", cred, req); err == nil && status == 200 {
				_ = json.Unmarshal(body, &out)
			}
			first <- out
		}()
		for deadline := time.Now().Add(30 * time.Second); ; { // the first join stepped: its window is open
			if status, body, _ := h.do(t, "GET", "/v1/admin/groups/"+group, e.adminToken, nil); status == 200 && strings.Contains(string(body), `"members":[{`) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the first join never made its member", group)
			}
			time.Sleep(10 * time.Millisecond) // polling the admin API for a state, not waiting for an event
		}
		second := h.join(t, group, cred, req)
		if len(second.grants) != 0 {
			t.Fatalf("%s: the second join, inside the window, was answered %d grants", group, len(second.grants))
		}
		for deadline := time.Now().Add(30 * time.Second); len(second.grants) < 32; {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the second member holds %d of 32 after 30 s", group, len(second.grants))
			}
			second.heartbeat(t, 2000)
		}
		if got := len((<-first).Grants); got != 32 {
			t.Fatalf("%s: the first join was answered %d grants, want 32", group, got)
		}
	}
	status, body, _ := h.do(t, "POST", "/v1/groups/ga-2/join", cred, req)
	if status != http.StatusTooManyRequests || limitOf(body) != "coordinator.tenant_member_rate" || !strings.Contains(string(body), "mints") {
		t.Fatalf("the third first join, 128 capabilities minted: %d (limit %q), want 429 naming coordinator.tenant_member_rate", status, limitOf(body))
	}
}

// BenchmarkLoneJoinIntoEmptyGroup is what the join window costs a
// consumer alone: from its join sent to the answer carrying its 12
// grants, into an empty group, with the window off and at the shipped
// initial_assign_delay (50 ms), side by side in one run. Each round a
// fresh group, so every join finds it empty.
func BenchmarkLoneJoinIntoEmptyGroup(b *testing.B) {
	for _, delay := range []time.Duration{0, group.DefaultInitialAssignDelay} {
		b.Run(fmt.Sprintf("initial_assign_delay=%s", delay), func(b *testing.B) {
			e := newEnv(b, map[string]int32{"orders": 12})
			e.cfg.Groups.InitialAssignDelay = delay
			e.cfg.Groups.Limits.GroupsPerCredential = 1 << 20
			h := e.start(b)
			groups := make([]string, b.N)
			for i := range groups {
				groups[i] = fmt.Sprintf("lone-%d", i)
			}
			cred := h.clientCredential(b, []string{"lone-*"}, []string{"orders"})
			var total time.Duration
			b.ResetTimer()
			for i := range b.N {
				start := time.Now()
				m := h.join(b, groups[i], cred, api.JoinRequest{Topics: []string{"orders"}})
				total += time.Since(start)
				if len(m.grants) != 12 {
					b.Fatalf("a lone member's join answered %d grants, want 12", len(m.grants))
				}
				h.call(b, "POST", "/v1/groups/"+groups[i]+"/leave", m.token, api.LeaveRequest{}, 200, nil)
			}
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "join-answer-ms")
		})
	}
}
