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
)

// TestJoinStormIsAssignedOnce: 20 members join an empty group of 200
// partitions at once, with the join window on (group/window.go). Every
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
	for i, a := range answers {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if n := len(a.Grants); n != 0 {
			t.Fatalf("member %s was granted %d partitions in its join answer, inside the window", a.MemberID, n)
		}
		e.remember(a.MemberToken)
		joined[i] = &member{h: h, group: "g", id: a.MemberID, token: a.MemberToken, grants: map[string]api.Grant{}}
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
// group's first grants from the join's answer to the member's heartbeat,
// so the heartbeat pays for what it mints as the join did (review21's
// join–leave amplification): two first assignments of 64 partitions spend
// a burst of 100, and the tenant's third first join waits out its debt
// (429 past the wait). Fails without the heartbeat's charge: the join,
// minting nothing, spends nothing, and the third is admitted.
func TestFirstAssignmentGrantsSpendTheTenantsRate(t *testing.T) {
	e := newEnv(t, map[string]int32{"big": 64})
	e.cfg.TenantMemberRate, e.cfg.TenantMemberBurst = 0.001, 100 // a token every 1,000 s
	e.cfg.Groups.InitialAssignDelay, e.cfg.Groups.InitialAssignDelayMax = 50*time.Millisecond, time.Second
	h := e.start(t)
	cred := h.clientCredential(t, []string{"ga-0", "ga-1", "ga-2"}, []string{"big"})
	req := api.JoinRequest{SessionTimeoutMs: 300_000, Topics: []string{"big"}}
	for i := range 2 {
		m := h.join(t, fmt.Sprintf("ga-%d", i), cred, req)
		if len(m.grants) != 0 {
			t.Fatalf("ga-%d: the join answer granted %d inside the window", i, len(m.grants))
		}
		for deadline := time.Now().Add(30 * time.Second); len(m.grants) < 64; {
			if time.Now().After(deadline) {
				t.Fatalf("ga-%d: %d of 64 granted after 30 s", i, len(m.grants))
			}
			m.heartbeat(t, 2000)
		}
	}
	status, body, _ := h.do(t, "POST", "/v1/groups/ga-2/join", cred, req)
	if status != http.StatusTooManyRequests || limitOf(body) != "coordinator.tenant_member_rate" || !strings.Contains(string(body), "mints") {
		t.Fatalf("the third first join, 128 capabilities minted in heartbeats: %d (limit %q), want 429 naming coordinator.tenant_member_rate", status, limitOf(body))
	}
}
