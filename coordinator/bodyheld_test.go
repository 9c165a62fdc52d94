package coordinator_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
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

	const conns = 6
	answers := make(chan int, conns)
	var open []net.Conn
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	for range conns {
		c, err := net.Dial("tcp", h.c.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, c)
		fmt.Fprintf(c, "POST /v1/groups/g/join HTTP/1.1\r\nHost: c\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", attacker, 1<<20)
		go func() {
			r, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				return // held, until the connection closes
			}
			answers <- r.StatusCode
		}()
	}
	deadline := time.After(10 * time.Second)
	for range conns - 2 {
		select {
		case status := <-answers:
			if status != http.StatusTooManyRequests {
				t.Fatalf("a body over the holder's bytes held answered %d, want 429", status)
			}
		case <-deadline:
			t.Fatalf("the coordinator waits for every body of one holder: %d MiB announced, max_body_bytes_held_per_holder 2 MiB", conns)
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

	for _, c := range open {
		c.Close()
	}
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
