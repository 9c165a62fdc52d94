package coordinator_test

import (
	"fmt"
	"html"
	"net/url"
	"regexp"
	"testing"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// TestAdminGroupSummary: GET /v1/admin/groups/{g}/summary counts the
// whole group — every member and partition, where a describe's page
// holds describe_page_max of them — by state, with the lag a describe
// shows summed; 404 for an unknown group, 400 for a query parameter.
// The console's groups page reads it: it showed the counts of the first
// describe page (7 members and partitions of 8 and 12 here).
func TestAdminGroupSummary(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 12})
	e.cfg.DescribePageMax = 7
	e.fill(t, 10)
	h := e.start(t)
	creds := h.clientCredential(t, []string{"g"}, []string{"orders"})
	for i := range 8 {
		h.join(t, "g", creds, api.JoinRequest{ClientID: fmt.Sprintf("c%d", i), Topics: []string{"orders"}, SessionTimeoutMs: 60000})
	}
	var s coordinator.GroupSummary
	h.call(t, "GET", "/v1/admin/groups/g/summary", e.adminToken, nil, 200, &s)

	// What the describe's pages say, walked to the end.
	var members, owned, revoking, unowned, partitions int
	var lag int64
	for path := "/v1/admin/groups/g"; path != ""; {
		var d coordinator.GroupDescription
		h.call(t, "GET", path, e.adminToken, nil, 200, &d)
		members += len(d.Members)
		for _, p := range d.Partitions {
			partitions++
			switch p.State {
			case "owned":
				owned++
			case "revoking":
				revoking++
			default:
				unowned++
			}
			if p.Lag == nil {
				t.Fatalf("describe: no lag for %s/%d", p.Topic, p.Partition)
			}
			lag += *p.Lag
		}
		path = ""
		if d.NextPartitionsAfter != "" || d.NextMembersAfter != "" {
			path = "/v1/admin/groups/g?" + url.Values{"partitions_after": {d.NextPartitionsAfter}, "members_after": {d.NextMembersAfter}}.Encode()
		}
	}
	if s.Group != "g" || s.Members != 8 || members != 8 || s.Partitions != 12 || partitions != 12 ||
		s.Owned != owned || s.Revoking != revoking || s.Unowned != unowned || s.Lag == nil || *s.Lag != lag || lag != 120 ||
		s.Config.Assignor == "" {
		t.Fatalf("summary %+v (lag %v), describe: %d members, %d partitions, %d owned, %d revoking, %d unowned, lag %d",
			s, s.Lag, members, partitions, owned, revoking, unowned, lag)
	}
	h.call(t, "GET", "/v1/admin/groups/nosuch/summary", e.adminToken, nil, 404, nil)
	h.call(t, "GET", "/v1/admin/groups/g/summary?limit=1", e.adminToken, nil, 400, nil)
	h.call(t, "GET", "/v1/admin/groups/g/summary", "", nil, 401, nil)

	c := newConsoleClient(t, h)
	if a := c.login(e.adminToken, nil); a.status != 303 {
		t.Fatalf("login: %d", a.status)
	}
	page := c.send("GET", "/console/groups", nil, nil)
	row := regexp.MustCompile(`<tr data-group="g">.*?</tr>`).FindString(page.body)
	cells := regexp.MustCompile(`<td>([^<]*)</td>`).FindAllStringSubmatch(row, -1)
	var got []string
	for _, cell := range cells {
		got = append(got, html.UnescapeString(cell[1]))
	}
	want := []string{"8", "12", fmt.Sprint(s.Owned), fmt.Sprint(s.Revoking), fmt.Sprint(s.Unowned), "120"}
	if len(got) < len(want) || fmt.Sprint(got[:len(want)]) != fmt.Sprint(want) {
		t.Fatalf("the groups page's line of g: members, partitions, owned, revoking, unowned, lag %v, want %v\n%s", got, want, row)
	}
}
