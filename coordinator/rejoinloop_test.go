package coordinator_test

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// TestRefusedRejoinsPutNothingInTheLoop (redteam17 #1): a rejoin or a
// renewal of a tenant's own member is priced by the partitions the member
// owns, which the loop counts (admitPerOwned) — and that count was asked
// of the loop before anything was paid and outside the tenant's loop
// share. A tenant whose tenant_member_rate was spent still put a loop
// query (a flush and a walk of the member's partitions) in the queue for
// every rejoin it sent, each then answered 429: join_rate keys a member
// token's rejoins by member, so a tenant of M members had M × join_burst
// (1,000) of them at once and M × 50 a second, free, ahead of every other
// tenant's requests. Here the loop is held while A, its rate spent, sends
// rejoins with its member token, with its credential and renewals: each
// is now 429 naming the rate without reaching the loop (without the fix
// all of them wait in its queue); B's member heartbeats once the loop
// runs.
func TestRefusedRejoinsPutNothingInTheLoop(t *testing.T) {
	const fired = 8 // of each kind
	e := newEnv(t, map[string]int32{"big": 10, "small": 1})
	e.cfg.TenantMemberRate, e.cfg.TenantMemberBurst = 0.001, 10 // a token every 1,000 s: A's join mints its 10
	e.cfg.MetadataInterval = time.Hour                          // no metadata request of its own in the held loop's queue
	h := e.start(t)
	credA := h.clientCredential(t, []string{"ga"}, []string{"big"})
	a := h.join(t, "ga", credA, api.JoinRequest{SessionTimeoutMs: 300_000, Topics: []string{"big"}})
	b := h.join(t, "gb", h.clientCredential(t, []string{"gb"}, []string{"small"}), api.JoinRequest{SessionTimeoutMs: 300_000, Topics: []string{"small"}})
	if len(a.grants) != 10 {
		t.Fatalf("A's member was granted %d partitions, want 10 (its tenant's whole burst)", len(a.grants))
	}

	release, err := coordinator.BlockLoop(h.c)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	unblock := func() { once.Do(release) }
	defer unblock()

	kinds := []struct {
		name, bearer string
		req          api.JoinRequest
	}{
		{"rejoin with its member token", a.token, api.JoinRequest{MemberID: a.id, SessionTimeoutMs: 300_000, Topics: []string{"big"}}},
		{"rejoin with its credential", credA, api.JoinRequest{MemberID: a.id, SessionTimeoutMs: 300_000, Topics: []string{"big"}}},
		{"renewal", credA, api.JoinRequest{MemberID: a.id, RenewToken: a.token, SessionTimeoutMs: 300_000, Topics: []string{"big"}}},
	}
	var limited, other atomic.Int64
	var wrong atomic.Value
	var wg sync.WaitGroup
	for _, k := range kinds {
		for range fired {
			wg.Add(1)
			go func() {
				defer wg.Done()
				status, body, header, err := h.try("POST", "/v1/groups/ga/join", k.bearer, k.req)
				if err == nil && status == http.StatusTooManyRequests && limitOf(body) == "coordinator.tenant_member_rate" && header.Get("Retry-After") != "" {
					limited.Add(1)
					return
				}
				other.Add(1)
				wrong.Store(fmt.Sprintf("%s: %v %d %.300s", k.name, err, status, body))
			}()
		}
	}
	all := int64(fired * len(kinds))
	deadline := time.Now().Add(20 * time.Second)
	for limited.Load()+other.Load() < all {
		if time.Now().After(deadline) {
			t.Fatalf("with the loop held, %d of A's %d rejoins and renewals (its rate spent) answered, %d waiting in the loop's queue: "+
				"a refused rejoin must not wait for the loop", limited.Load()+other.Load(), all, coordinator.LoopQueued(h.c))
		}
		time.Sleep(10 * time.Millisecond) // polling the real server's answers
	}
	if other.Load() != 0 {
		t.Fatalf("%d of A's rejoins answered otherwise than 429 naming coordinator.tenant_member_rate: %v", other.Load(), wrong.Load())
	}
	if n := coordinator.LoopQueued(h.c); n != 0 {
		t.Fatalf("%d requests in the held loop's queue after A's refused rejoins, want none", n)
	}

	unblock()
	b.heartbeat(t, 0) // B is served once the loop runs
	wg.Wait()
}

// TestRefusedRejoinsOweTheirCount: a rejoin refused for what its member
// owns has had the loop walk the member's partitions, and owes that walk
// as a read does (a token per 100 partitions) besides its first token —
// else a tenant whose bucket never refills to what its large member owns
// would have the loop walk it at tenant_member_rate (5,000 walks a
// second). A's member owns 200 partitions and 10 tokens are left: the
// rejoin takes 1 and owes 2, so 7 heartbeats are served before a 429
// (9 without the walk owed).
func TestRefusedRejoinsOweTheirCount(t *testing.T) {
	e := newEnv(t, map[string]int32{"big": 200})
	e.cfg.TenantMemberRate, e.cfg.TenantMemberBurst = 0.001, 210 // a token every 1,000 s: A's join mints 200
	h := e.start(t)
	a := h.join(t, "ga", h.clientCredential(t, []string{"ga"}, []string{"big"}), api.JoinRequest{SessionTimeoutMs: 300_000, Topics: []string{"big"}})
	if len(a.grants) != 200 {
		t.Fatalf("A's member was granted %d partitions, want 200", len(a.grants))
	}
	status, body, _, err := h.try("POST", "/v1/groups/ga/join", a.token, api.JoinRequest{MemberID: a.id, SessionTimeoutMs: 300_000, Topics: []string{"big"}})
	if err != nil || status != http.StatusTooManyRequests || limitOf(body) != "coordinator.tenant_member_rate" {
		t.Fatalf("A's rejoin fencing 200 partitions with 10 tokens: %v %d %.300s, want 429 naming coordinator.tenant_member_rate", err, status, body)
	}
	served := 0
	for ; served < 20; served++ {
		status, body, _, err := h.try("POST", "/v1/groups/ga/heartbeat", a.token, `{"wait_ms":0}`)
		if err != nil {
			t.Fatal(err)
		}
		if status == http.StatusTooManyRequests && limitOf(body) == "coordinator.tenant_member_rate" {
			break
		}
		if status != http.StatusOK {
			t.Fatalf("A's heartbeat: %d %.300s", status, body)
		}
	}
	if served != 7 {
		t.Fatalf("A's heartbeats served after the refused rejoin: %d, want 7 (10 tokens, 1 taken by the rejoin, 2 owed for counting 200 partitions)", served)
	}
}
