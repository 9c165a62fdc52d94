package coordinator_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// TestOneTenantCannotFillTheLoopQueue is redteam13 #1's attack over real
// sockets, made deterministic: the loop is held busy (BlockLoop) while
// tenant A fires many heartbeats at once — as A's spinning connections
// keep its requests queued at all times — and then tenant B's member
// heartbeats. Without a share every one of A's requests sat in the loop's
// queue ahead of B's (B waited behind 20, in the attack behind ~200: 0.55
// → 21 ms); now at most tenant_loop_share of A's are queued, the next
// tenant_loop_waiters wait in the shell for A's own places, and the rest
// are 429 rate_limited with Retry-After at once. Once the loop runs again
// B and every one of A's queued and waiting heartbeats are answered.
func TestOneTenantCannotFillTheLoopQueue(t *testing.T) {
	const share, waiters, fired = 4, 8, 20
	e := newEnv(t, map[string]int32{"orders": 1})
	e.cfg.TenantLoopShare, e.cfg.TenantLoopWaiters = share, waiters
	// No metadata re-read while the loop is held: each one queues a
	// request of its own (every 200 ms in these tests), counted by
	// LoopQueued beside A's — the test failed when one fell in the window.
	e.cfg.MetadataInterval = time.Hour
	h := e.start(t)
	coordinator.LengthenLoopShareWait(h.c, time.Minute) // no waiter gives up while the test holds the loop
	attacker := h.join(t, "g", h.clientCredential(t, []string{"g"}, []string{"orders"}), api.JoinRequest{Topics: []string{"orders"}})
	victim := h.join(t, "v", h.clientCredential(t, []string{"v"}, []string{"orders"}), api.JoinRequest{Topics: []string{"orders"}})
	attacker.heartbeat(t, 0)
	victim.heartbeat(t, 0)

	release, err := coordinator.BlockLoop(h.c)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	unblock := func() { once.Do(release) }
	defer unblock()

	var ok, limited, other atomic.Int64
	var wrong atomic.Value
	var wg sync.WaitGroup
	for range fired {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, body, header, err := h.try("POST", "/v1/groups/g/heartbeat", attacker.token, `{"wait_ms":0}`)
			switch {
			case err == nil && status == http.StatusOK:
				ok.Add(1)
			case err == nil && status == http.StatusTooManyRequests && header.Get("Retry-After") == "1" && limitOf(body) == "coordinator.tenant_loop_waiters":
				limited.Add(1)
			default:
				other.Add(1)
				wrong.Store(fmt.Sprintf("%v %d %s (Retry-After %q)", err, status, body, header.Get("Retry-After")))
			}
		}()
	}
	eventually(t, func() string {
		queued, waiting := coordinator.LoopQueued(h.c), coordinator.LoopShareWaiting(h.c)
		if n := int64(queued+waiting) + limited.Load() + other.Load(); n < fired {
			return fmt.Sprintf("A's %d heartbeats: %d queued for the loop, %d waiting for a place, %d refused", fired, queued, waiting, limited.Load()+other.Load())
		}
		return ""
	})
	if queued, waiting := coordinator.LoopQueued(h.c), coordinator.LoopShareWaiting(h.c); queued > share || waiting != waiters || limited.Load() != fired-share-waiters {
		t.Fatalf("with the loop busy A's %d heartbeats: %d queued for the loop (want at most tenant_loop_share %d), %d waiting (want %d), %d refused 429 with Retry-After (want %d); other answers: %d %v",
			fired, queued, share, waiting, waiters, limited.Load(), fired-share-waiters, other.Load(), wrong.Load())
	}

	// B's heartbeat is behind at most A's share, not all of A's.
	victimDone := make(chan string, 1)
	go func() {
		status, body, _, err := h.try("POST", "/v1/groups/v/heartbeat", victim.token, `{"wait_ms":0}`)
		if err != nil || status != http.StatusOK {
			victimDone <- fmt.Sprintf("%v %d %s", err, status, body)
			return
		}
		victimDone <- ""
	}()
	eventually(t, func() string {
		if n := coordinator.LoopQueued(h.c); n != share+1 {
			return fmt.Sprintf("%d requests queued for the loop, want A's %d and B's", n, share)
		}
		return ""
	})
	unblock()
	if msg := <-victimDone; msg != "" {
		t.Fatalf("B's heartbeat: %s", msg)
	}
	wg.Wait()
	if ok.Load() != share+waiters || other.Load() != 0 {
		t.Fatalf("after the loop ran: %d of A's heartbeats answered 200 (want its %d queued and %d waiting), %d refused, %d other: %v",
			ok.Load(), share, waiters, limited.Load(), other.Load(), wrong.Load())
	}
	if got := h.metric(t, `capgate_coordinator_tenant_loop_refused_total{limit="tenant_loop_waiters"}`); got != fired-share-waiters {
		t.Errorf("capgate_coordinator_tenant_loop_refused_total %v, want %d", got, fired-share-waiters)
	}
}

// limitOf is the details.limit of an error body, "" when it has none.
func limitOf(body []byte) string {
	var e struct {
		Error struct {
			Code  api.Code `json:"code"`
			Limit string   `json:"limit"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error.Code != api.CodeRateLimited {
		return ""
	}
	return e.Error.Limit
}

// TestOneTenantsMemberRate: past tenant_member_burst a tenant's member
// requests wait for tenant_member_rate's next token, and one whose token
// is further off than the longest wait (5 s) is 429 rate_limited at once
// with Retry-After and the limit named; another tenant's member is not
// affected, nor are the tenant's requests counted for it. Fails without
// the rate (the third heartbeat answered 200).
func TestOneTenantsMemberRate(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	e.cfg.TenantMemberRate, e.cfg.TenantMemberBurst = 0.01, 3 // a token a 100 s; a1's join mints one
	h := e.start(t)
	credential := h.clientCredential(t, []string{"g"}, []string{"orders"})
	a1 := h.join(t, "g", credential, api.JoinRequest{Topics: []string{"orders"}})
	a2 := h.join(t, "g", credential, api.JoinRequest{Topics: []string{"orders"}})
	victim := h.join(t, "v", h.clientCredential(t, []string{"v"}, []string{"orders"}), api.JoinRequest{Topics: []string{"orders"}})
	for _, m := range []*member{a1, a2} {
		if status, body, _, err := h.try("POST", "/v1/groups/g/heartbeat", m.token, `{"wait_ms":0}`); err != nil || status != http.StatusOK {
			t.Fatalf("a heartbeat within the tenant's burst: %v %d %s", err, status, body)
		}
	}
	status, body, header, err := h.try("POST", "/v1/groups/g/heartbeat", a1.token, `{"wait_ms":0}`)
	if err != nil || status != http.StatusTooManyRequests || limitOf(body) != "coordinator.tenant_member_rate" || header.Get("Retry-After") == "" {
		t.Fatalf("the tenant's third heartbeat past its burst: %v %d %s (Retry-After %q), want 429 naming coordinator.tenant_member_rate", err, status, body, header.Get("Retry-After"))
	}
	for range 2 {
		if status, body, _, err := h.try("POST", "/v1/groups/v/heartbeat", victim.token, `{"wait_ms":0}`); err != nil || status != http.StatusOK {
			t.Fatalf("another tenant's heartbeat: %v %d %s", err, status, body)
		}
	}
	if got := h.metric(t, `capgate_coordinator_tenant_loop_refused_total{limit="tenant_member_rate"}`); got != 1 {
		t.Errorf("refused for the rate: %v, want 1", got)
	}
}

// TestAttenuationsSpendTheTenantsRate is redteam13 #4: attenuations were
// rate-limited per chain root only, and a tenant holds a root per
// partition granted (and a new one at each renewal), so it had a
// signature minted attenuate_rate times a second for each. They now spend
// the tenant's tenant_member_rate too: past its burst, the attenuation of
// another of its capabilities is 429; another tenant's is served.
func TestAttenuationsSpendTheTenantsRate(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 3})
	e.cfg.TenantMemberRate, e.cfg.TenantMemberBurst = 0.01, 5 // a token a 100 s; a's join mints three
	h := e.start(t)
	a := h.join(t, "g", h.clientCredential(t, []string{"g"}, []string{"orders"}), api.JoinRequest{Topics: []string{"orders"}})
	b := h.join(t, "v", h.clientCredential(t, []string{"v"}, []string{"orders"}), api.JoinRequest{Topics: []string{"orders"}})
	var roots []string
	for p := range int32(3) {
		g, ok := a.grant("orders", p)
		if !ok {
			t.Fatalf("member a holds no grant of orders/%d", p)
		}
		roots = append(roots, g.Capability)
	}
	attenuate := func(capability string) (int, []byte) {
		status, body, _, err := h.try("POST", "/v1/capabilities/attenuate", capability, api.AttenuateRequest{Ops: []string{"fetch"}})
		if err != nil {
			t.Fatal(err)
		}
		return status, body
	}
	for _, root := range roots[:2] {
		if status, body := attenuate(root); status != http.StatusOK {
			t.Fatalf("an attenuation within the tenant's burst: %d %s", status, body)
		}
	}
	if status, body := attenuate(roots[2]); status != http.StatusTooManyRequests || !strings.Contains(string(body), "tenant_member_rate") {
		t.Fatalf("the tenant's third attenuation, of another chain: %d %s, want 429 naming tenant_member_rate", status, body)
	}
	g, _ := b.grant("orders", 0)
	if status, body := attenuate(g.Capability); status != http.StatusOK {
		t.Fatalf("another tenant's attenuation: %d %s", status, body)
	}
}
