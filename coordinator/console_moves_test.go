package coordinator_test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/capgate/capgate/api"
)

// TestConsoleGroupPageSaysMovesHeldBack: a group whose moves
// max_moves_per_second holds back (the admin API's moves_held_back,
// newuser7) says so on its console page beside moves/s, where the grid
// alone showed partitions owned by one member and nothing moving toward
// the other; a group with none held back shows no such count. Fails
// without: the page has no stat-held.
func TestConsoleGroupPageSaysMovesHeldBack(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 64})
	h := e.start(t)
	h.call(t, "PUT", "/v1/admin/groups/g/config", e.adminToken, map[string]any{"max_moves_per_second": 1}, 200, nil)
	creds := h.clientCredential(t, []string{"g"}, []string{"orders"})
	h.join(t, "g", creds, api.JoinRequest{SessionTimeoutMs: 300_000, Topics: []string{"orders"}})
	c := newConsoleClient(t, h)
	if a := c.login(e.adminToken, nil); a.status != 303 {
		t.Fatalf("login: %d", a.status)
	}
	held := regexp.MustCompile(`<b id="stat-held">(\d+)</b><span>moves held back</span>`)
	if page := c.send("GET", "/console/groups/g", nil, nil); page.status != 200 || held.MatchString(page.body) {
		t.Fatalf("one member, nothing to move: %d, held back shown: %v", page.status, held.FindString(page.body))
	}
	h.join(t, "g", creds, api.JoinRequest{SessionTimeoutMs: 300_000, Topics: []string{"orders"}})
	var want int
	eventually(t, func() string {
		var g struct {
			MovesHeldBack int `json:"moves_held_back"`
		}
		h.call(t, "GET", "/v1/admin/groups/g", e.adminToken, nil, 200, &g)
		if want = g.MovesHeldBack; want == 0 {
			return "no move held back yet"
		}
		return ""
	})
	page := c.send("GET", "/console/groups/g", nil, nil)
	m := held.FindStringSubmatch(page.body)
	if page.status != 200 || m == nil {
		t.Fatalf("a second member, moves at 1 a second: %d, no moves held back on the page", page.status)
	}
	// One move a second: by the page's read a few more may have started.
	if n, _ := strconv.Atoi(m[1]); n <= 0 || n > want {
		t.Fatalf("page says %d moves held back, the admin API said %d just before", n, want)
	}
}

// TestConsoleGroupPageSaysThePartitionsAreCut: the console reads a
// group's first describe_page_max partitions (one admin page); a group
// with more says so above its grid and where to see them all, where it
// said "partitions 1–7 of 7" as if that were the whole group. A group
// within the page says nothing of it. Fails without: no grid-cut.
func TestConsoleGroupPageSaysThePartitionsAreCut(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 20, "small": 3})
	e.cfg.DescribePageMax = 7
	h := e.start(t)
	for group, topic := range map[string]string{"big": "orders", "few": "small"} {
		creds := h.clientCredential(t, []string{group}, []string{topic})
		h.join(t, group, creds, api.JoinRequest{SessionTimeoutMs: 300_000, Topics: []string{topic}})
	}
	c := newConsoleClient(t, h)
	if a := c.login(e.adminToken, nil); a.status != 303 {
		t.Fatalf("login: %d", a.status)
	}
	if page := c.send("GET", "/console/groups/big", nil, nil); page.status != 200 || !strings.Contains(page.body, `id="grid-cut"`) ||
		!strings.Contains(page.body, "partitions 1–7 of 7") {
		t.Fatalf("20 partitions, pages of 7: %d, cut said: %v", page.status, strings.Contains(page.body, `id="grid-cut"`))
	}
	if page := c.send("GET", "/console/groups/few", nil, nil); page.status != 200 || strings.Contains(page.body, `id="grid-cut"`) {
		t.Fatalf("3 partitions, pages of 7: %d, cut said: %v", page.status, strings.Contains(page.body, `id="grid-cut"`))
	}
}
