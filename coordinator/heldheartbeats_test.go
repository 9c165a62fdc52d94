package coordinator_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
)

// TestOneTenantsHeldHeartbeatsLeaveConnections is the attack of
// redteam12 #2 over real sockets: tenant A's members each hold a
// heartbeat long poll on a connection of its own (as behind a proxy,
// where a held request is an upstream connection and an answered one
// gives it back), more of them than max_connections; tenant B's member
// then heartbeats. Without a bound every slot was A's for as long as
// heartbeat_wait and B's heartbeat was 503 overloaded at accept, for the
// price of one request per heartbeat_wait per member. Now A holds at
// most held_heartbeats_per_tenant; its others are answered 429
// rate_limited with Retry-After at once, and B is served.
func TestOneTenantsHeldHeartbeatsLeaveConnections(t *testing.T) {
	const slots, heldMax, members = 24, 8, 30
	e := newEnv(t, map[string]int32{"orders": 1})
	e.cfg.MaxConnections, e.cfg.MaxConnectionsPerAddress = slots, slots
	e.cfg.Groups.HeartbeatWait = 20 * time.Second // longer than eventually's deadline: a hold is not let go meanwhile
	e.cfg.Groups.Limits.HeldHeartbeatsPerTenant = heldMax
	e.cfg.JoinBurst = members
	h := e.start(t)
	attacker := h.clientCredential(t, []string{"g"}, []string{"orders"})
	victim := h.join(t, "v", h.clientCredential(t, []string{"v"}, []string{"orders"}), api.JoinRequest{Topics: []string{"orders"}})
	victim.heartbeat(t, 1) // its grant, so that its next heartbeat has nothing to say
	var ms []*member
	for range members {
		ms = append(ms, h.join(t, "g", attacker, api.JoinRequest{Topics: []string{"orders"}}))
	}
	h.client.CloseIdleConnections()

	var refused, limited atomic.Int64
	for _, m := range ms {
		go func() {
			client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: time.Minute}
			for {
				status, retryAfter, err := heartbeatOn(client, h.base, m, 20_000)
				if err == nil && status == http.StatusOK {
					continue
				}
				if status == http.StatusTooManyRequests && retryAfter != "" {
					limited.Add(1)
				}
				refused.Add(1)
				return // backs off past the test's end
			}
		}()
	}
	eventually(t, func() string {
		if n := refused.Load(); n < members-slots {
			return fmt.Sprintf("%d of A's heartbeats answered", n)
		}
		status, body, header, err := h.try("POST", "/v1/groups/v/heartbeat", victim.token, api.HeartbeatRequest{WaitMs: 1})
		if err != nil || status != http.StatusOK {
			return fmt.Sprintf("B's heartbeat beside A's held ones: %v %d %s (Retry-After %s); A's refused: %d", err, status, body, header.Get("Retry-After"), refused.Load())
		}
		return ""
	})
	if n := refused.Load(); n > members-heldMax || limited.Load() == 0 {
		t.Fatalf("%d of A's %d heartbeats refused (%d 429 with Retry-After), want %d held", n, members, limited.Load(), heldMax)
	}
}

// heartbeatOn sends m's heartbeat through client, whose connection is
// closed once it is answered.
func heartbeatOn(client *http.Client, base string, m *member, waitMs int64) (status int, retryAfter string, err error) {
	req, err := http.NewRequest("POST", base+"/v1/groups/"+m.group+"/heartbeat", strings.NewReader(fmt.Sprintf(`{"wait_ms":%d}`, waitMs)))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+m.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Retry-After"), nil
}
