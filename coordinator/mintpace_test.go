package coordinator_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// A join's answer paid its tenant's tenant_member_rate after the fact,
// and at most the burst (redteam16): one granted more partitions than
// tenant_member_burst minted them all for a burst's price, and first
// joins admitted together while the tenant owed nothing each minted its
// whole group before any charge landed. Now an answer mints what the
// bucket holds and at most the burst more (into debt), the rest left for
// the member's heartbeats. Here the burst is 10 and a token comes every
// 1,000 s: A's first member of a 64-partition group is answered 20
// capabilities (64 without: pays 10), and eight first joins at once
// into eight more groups mint none between them — the bucket owes the
// burst (without: 64 each that got past the debt check together), while
// the groups' members own every partition all the same.
func TestJoinsMintNoMoreThanTheTenantsRatePays(t *testing.T) {
	e := newEnv(t, map[string]int32{"big": 64, "small": 1})
	e.cfg.TenantMemberRate, e.cfg.TenantMemberBurst = 0.001, 10
	h := e.start(t)
	groups := []string{"ga"}
	for i := range 8 {
		groups = append(groups, fmt.Sprintf("gp-%d", i))
	}
	credA := h.clientCredential(t, groups, []string{"big"})
	credB := h.clientCredential(t, []string{"gb"}, []string{"small"})
	req := api.JoinRequest{SessionTimeoutMs: 300_000, Topics: []string{"big"}}
	first := h.join(t, "ga", credA, req)
	if n := len(first.grants); n != 20 {
		t.Fatalf("A's first member of a 64-partition group was answered %d capabilities with 10 tokens and a burst of debt, want 20", n)
	}
	if owned := ownedCount(h.describe(t, "ga"), first.id); owned != 64 {
		t.Fatalf("A's member owns %d partitions, want all 64 (the rest of the grants wait for its heartbeats)", owned)
	}

	var wg sync.WaitGroup
	minted := make([]int, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, body, _, err := h.try("POST", fmt.Sprintf("/v1/groups/gp-%d/join", i), credA, req)
			if err != nil {
				t.Errorf("join gp-%d: %v", i, err)
				return
			}
			if status != http.StatusOK {
				return // 429: the tenant owes its burst
			}
			var resp api.JoinResponse
			if err := json.Unmarshal(body, &resp); err != nil {
				t.Errorf("join gp-%d: %v", i, err)
				return
			}
			minted[i] = len(resp.Grants)
		}()
	}
	wg.Wait()
	total := 0
	for _, n := range minted {
		total += n
	}
	if total != 0 {
		t.Fatalf("eight first joins at once, the tenant owing its burst already, minted %d capabilities (%v), want 0", total, minted)
	}
	if m := h.join(t, "gb", credB, api.JoinRequest{SessionTimeoutMs: 300_000, Topics: []string{"small"}}); len(m.grants) != 1 {
		t.Fatalf("B's first member beside A was granted %d partitions, want 1", len(m.grants))
	}
}

// TestParallelFirstJoinsMintWithinTheBucket is the window of
// TestJoinsMintNoMoreThanTheTenantsRatePays with a bucket full: eight
// first joins at once into empty groups of 64 partitions each had the
// debt check pass together (nothing owed yet) and minted 512 for a
// bucket of 10; now what they mint between them is at most what it holds
// and its burst of debt.
func TestParallelFirstJoinsMintWithinTheBucket(t *testing.T) {
	e := newEnv(t, map[string]int32{"big": 64})
	e.cfg.TenantMemberRate, e.cfg.TenantMemberBurst = 0.001, 10
	h := e.start(t)
	var groups []string
	for i := range 8 {
		groups = append(groups, fmt.Sprintf("gp-%d", i))
	}
	credA := h.clientCredential(t, groups, []string{"big"})
	req := api.JoinRequest{SessionTimeoutMs: 300_000, Topics: []string{"big"}}
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := 0
	start := make(chan struct{})
	for _, g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			status, body, _, err := h.try("POST", "/v1/groups/"+g+"/join", credA, req)
			if err != nil || status != http.StatusOK {
				return
			}
			var resp api.JoinResponse
			if json.Unmarshal(body, &resp) == nil {
				mu.Lock()
				total += len(resp.Grants)
				mu.Unlock()
			}
		}()
	}
	close(start)
	wg.Wait()
	if total == 0 || total > 20 {
		t.Fatalf("eight first joins at once minted %d capabilities with 10 tokens, want 1 to 20", total)
	}
}

// TestGrantsLeftForLaterArriveInHeartbeats: what a join's answer could
// not pay for comes in the member's next heartbeats, each minting what
// the rate has paid meanwhile, until the member holds a capability for
// every partition it owns — each at its epoch, none lost.
func TestGrantsLeftForLaterArriveInHeartbeats(t *testing.T) {
	e := newEnv(t, map[string]int32{"big": 64})
	e.cfg.TenantMemberRate, e.cfg.TenantMemberBurst = 500, 10 // the debt of a burst: 20 ms
	h := e.start(t)
	credA := h.clientCredential(t, []string{"ga"}, []string{"big"})
	m := h.join(t, "ga", credA, api.JoinRequest{SessionTimeoutMs: 300_000, Topics: []string{"big"}})
	if n := len(m.grants); n > 20 {
		t.Fatalf("join answered %d capabilities, want at most 20 (10 tokens, a burst of debt)", n)
	}
	deadline := time.Now().Add(time.Minute)
	for len(m.grants) < 64 {
		if time.Now().After(deadline) {
			t.Fatalf("the member holds %d of its 64 partitions' capabilities after a minute of heartbeats", len(m.grants))
		}
		sent := time.Now()
		resp, err := m.tryHeartbeat(1000)
		if err != nil {
			continue // 429 while the tenant owes more than the wait: heartbeat again
		}
		// A heartbeat's own token and what accrued while it waited, a
		// burst more, and what accrued while it was held for the
		// partitions left (paceMints): never more than the rate paid.
		accrued := int(500*time.Since(sent).Seconds()) + 1
		if n := len(resp.Grants) + len(resp.Renew); n > 22+accrued {
			t.Fatalf("a heartbeat minted %d capabilities, want at most a burst and what accrued (%d)", n, accrued)
		}
	}
	d := h.describe(t, "ga")
	for _, p := range d.Partitions {
		g, ok := m.grant(p.Topic, p.Partition)
		if !ok || g.Epoch != p.Epoch {
			t.Fatalf("partition %s/%d at epoch %d: the member's capability %+v (held %v)", p.Topic, p.Partition, p.Epoch, g, ok)
		}
	}
}

// A resync renews every partition the member owns, once a second, and a
// heartbeat minted whatever it carried for its one token: a tenant's
// member of 64 partitions saying resync had 64 signatures a second made
// for a token each (a tenant owning 10,000 partitions over its groups:
// 10,000 a second per token a second) (redteam16). Now each renewal
// is a token: after one resync the bucket (100, a token every 1,000 s)
// owes, and the member's next heartbeat is 429 naming the rate
// (without: 200, and the next resync 64 more).
func TestResyncsSpendTheTenantsRate(t *testing.T) {
	e := newEnv(t, map[string]int32{"big": 64, "small": 1})
	e.cfg.TenantMemberRate, e.cfg.TenantMemberBurst = 0.001, 100
	h := e.start(t)
	credA := h.clientCredential(t, []string{"ga"}, []string{"big"})
	credB := h.clientCredential(t, []string{"gb"}, []string{"small"})
	a := h.join(t, "ga", credA, api.JoinRequest{SessionTimeoutMs: 300_000, Topics: []string{"big"}}) // 64: 36 left
	b := h.join(t, "gb", credB, api.JoinRequest{SessionTimeoutMs: 300_000, Topics: []string{"small"}})
	a.resync = true
	if resp := a.heartbeat(t, 0); len(resp.Renew) != 64 {
		t.Fatalf("A's resync renewed %d capabilities, want 64", len(resp.Renew))
	}
	status, body, _, err := h.try("POST", "/v1/groups/ga/heartbeat", a.token, api.HeartbeatRequest{WaitMs: 0, Resync: true})
	if err != nil || status != http.StatusTooManyRequests || limitOf(body) != "coordinator.tenant_member_rate" {
		t.Fatalf("A's heartbeat after a resync of 64 with 35 tokens: %v %d %.300s, want 429 naming coordinator.tenant_member_rate", err, status, body)
	}
	b.heartbeat(t, 0)
}

// ownedBy counts the partitions of d member owns.
func ownedCount(d coordinator.GroupDescription, member string) int {
	n := 0
	for _, p := range d.Partitions {
		if p.Owner == member {
			n++
		}
	}
	return n
}
