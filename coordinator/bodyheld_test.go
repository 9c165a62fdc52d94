package coordinator_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/internal/bodyheld/bodyheldtest"
)

// TestLargeBodiesHeldAreBounded is redteam10 #5, the attack as its test:
// any tenant's token (here a client credential) opens connections and
// sends only the headers of 1 MiB requests; fasthttp allocated each body
// at its Content-Length at once and waited read_timeout for it (300
// connections: 307 MiB; max_connections_per_address 1,000: 1 GiB). Now
// the bodies held are counted from their headers: here 2 MiB per holder,
// so of six such connections two are read and the other four answered
// 429 rate_limited at once (the body not read); another tenant's large
// join and the admin's large request are still served; once the
// connections go, nothing is held.
func TestLargeBodiesHeldAreBounded(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	e.cfg.MaxBodyBytesHeld, e.cfg.MaxBodyBytesHeldPerHolder = 4<<20, 2<<20
	h := e.start(t)
	attacker := h.clientCredential(t, []string{"g"}, []string{"orders"})
	victim := h.clientCredential(t, []string{"v"}, []string{"orders"})

	head := fmt.Sprintf("POST /v1/groups/g/join HTTP/1.1\r\nHost: c\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", attacker, 1<<20)
	statuses, closeAll := bodyheldtest.Heads(t, h.c.Addr().String(), head, 6, 4)
	defer closeAll()
	for _, status := range statuses {
		if status != http.StatusTooManyRequests {
			t.Fatalf("a body over the holder's bytes held answered %d, want 429", status)
		}
	}

	topics := make([]string, 400) // a 14 KB join
	for i := range topics {
		topics[i] = fmt.Sprintf("topic-with-a-rather-long-name-%03d", i)
	}
	topics[0] = "orders"
	if status, body, _ := h.do(t, "POST", "/v1/groups/v/join", victim, api.JoinRequest{Topics: topics}); status == http.StatusTooManyRequests || status == http.StatusRequestEntityTooLarge {
		t.Fatalf("another tenant's 14 KB join beside them: %d %s", status, body)
	}
	status, body, _ := h.do(t, "POST", "/v1/groups/g/join", attacker, api.JoinRequest{Topics: topics})
	if status != http.StatusTooManyRequests || !strings.Contains(string(body), "max_body_bytes_held_per_holder") {
		t.Fatalf("the attacker's own 14 KB join: %d %s, want 429 naming max_body_bytes_held_per_holder", status, body)
	}

	closeAll()
	eventually(t, func() string {
		if n := coordinator.BodiesHeld(h.c); n != 0 {
			return fmt.Sprintf("%d body bytes still held once the connections went", n)
		}
		return ""
	})
	if status, body, _ := h.do(t, "POST", "/v1/groups/g/join", attacker, api.JoinRequest{Topics: topics}); status == http.StatusTooManyRequests || status == http.StatusRequestEntityTooLarge {
		t.Fatalf("its join once its connections went: %d %s", status, body)
	}
}

// TestMemberTokensBodiesCountForTheirTenant is redteam13 #2: a member
// token's large bodies counted for its member, so one tenant with many
// members (one credential joining again and again) held
// max_body_bytes_held_per_holder per member — up to max_body_bytes_held in
// all, every other tenant's large body then 503. Now they count for the
// member's tenant: with 2 MiB per holder, two of its members' 1 MiB
// commits announced and not sent are held, a third member's is 429 at
// once, and another tenant's member is served.
func TestMemberTokensBodiesCountForTheirTenant(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	e.cfg.MaxBodyBytesHeld, e.cfg.MaxBodyBytesHeldPerHolder = 8<<20, 2<<20
	h := e.start(t)
	attacker := h.clientCredential(t, []string{"g"}, []string{"orders"})
	var ms []*member
	for range 3 {
		ms = append(ms, h.join(t, "g", attacker, api.JoinRequest{Topics: []string{"orders"}}))
	}
	victim := h.join(t, "v", h.clientCredential(t, []string{"v"}, []string{"orders"}), api.JoinRequest{Topics: []string{"orders"}})
	head := func(m *member) string {
		return fmt.Sprintf("POST /v1/groups/%s/commit HTTP/1.1\r\nHost: c\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", m.group, m.token, 1<<20)
	}
	for i, m := range ms[:2] {
		_, closeHeld := bodyheldtest.Heads(t, h.c.Addr().String(), head(m), 1, 0)
		defer closeHeld()
		eventually(t, func() string {
			if n := coordinator.BodiesHeld(h.c); n != int64(i+1)<<20 {
				return fmt.Sprintf("%d body bytes held, want member %d's 1 MiB body counted", n, i+1)
			}
			return ""
		})
	}
	statuses, closeThird := bodyheldtest.Heads(t, h.c.Addr().String(), head(ms[2]), 1, 1)
	defer closeThird()
	if statuses[0] != http.StatusTooManyRequests {
		t.Fatalf("a third member of the tenant announcing a 1 MiB body beside two held: %d, want 429", statuses[0])
	}
	_, closeVictim := bodyheldtest.Heads(t, h.c.Addr().String(), head(victim), 1, 0)
	defer closeVictim()
	eventually(t, func() string {
		if n := coordinator.BodiesHeld(h.c); n != 3<<20 {
			return fmt.Sprintf("%d body bytes held, want the other tenant's member's body counted beside the tenant's two", n)
		}
		return ""
	})
}
