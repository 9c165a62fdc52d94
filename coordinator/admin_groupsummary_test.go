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

// TestAdminGroupsWithSummaries: GET /v1/admin/groups?summaries=true
// answers each listed group's summary with the page, as its own route
// does — one call for a list where `capgate admin groups` made one per
// group (newuser12). The page's lag lookups are shared and bounded: the
// distinct partitions of its groups, at most describe_lag_max (14 here)
// — g1 and g2 read the same 12 of orders, g3 would add audit's 4 and
// has no lag in the list (its own summary has). Paged by limit and
// after like the names; summaries= takes true or false only.
func TestAdminGroupsWithSummaries(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 12, "audit": 4})
	e.cfg.DescribeLagMax = 14
	e.fill(t, 10)
	h := e.start(t)
	creds := h.clientCredential(t, []string{"g*"}, []string{"orders", "audit"})
	for group, topic := range map[string]string{"g1": "orders", "g2": "orders", "g3": "audit"} {
		h.join(t, group, creds, api.JoinRequest{ClientID: "c-" + group, Topics: []string{topic}, SessionTimeoutMs: 60000})
	}
	var list coordinator.GroupsResponse
	h.call(t, "GET", "/v1/admin/groups?summaries=true", e.adminToken, nil, 200, &list)
	if fmt.Sprint(list.Groups) != "[g1 g2 g3]" || len(list.Summaries) != 3 {
		t.Fatalf("groups with summaries: %+v", list)
	}
	for i, name := range list.Groups {
		var own coordinator.GroupSummary
		h.call(t, "GET", "/v1/admin/groups/"+name+"/summary", e.adminToken, nil, 200, &own)
		got := list.Summaries[i]
		if name == "g3" {
			if got.Lag != nil || own.Lag == nil || *own.Lag != 40 {
				t.Errorf("g3: listed lag %v (own %v), want none in the list (past describe_lag_max) and 40 of its own", got.Lag, own.Lag)
			}
			got.Lag = own.Lag
		}
		gotLag, ownLag := ptrValue(got.Lag), ptrValue(own.Lag)
		got.Lag, own.Lag = nil, nil
		if got != own || gotLag != ownLag {
			t.Errorf("%s listed %+v (lag %v), its summary %+v (lag %v)", name, got, gotLag, own, ownLag)
		}
	}
	if l := list.Summaries[0].Lag; l == nil || *l != 120 {
		t.Errorf("g1's listed lag %v, want 120", ptrValue(l))
	}
	var page coordinator.GroupsResponse
	h.call(t, "GET", "/v1/admin/groups?summaries=true&limit=2&after=g1", e.adminToken, nil, 200, &page)
	if fmt.Sprint(page.Groups) != "[g2 g3]" || len(page.Summaries) != 2 || page.Summaries[1].Group != "g3" || page.NextAfter != "" {
		t.Errorf("page after g1: %+v", page)
	}
	var plain map[string]any
	h.call(t, "GET", "/v1/admin/groups?summaries=false", e.adminToken, nil, 200, &plain)
	if _, ok := plain["summaries"]; ok {
		t.Errorf("summaries=false answered summaries: %v", plain)
	}
	h.call(t, "GET", "/v1/admin/groups?summaries=yes", e.adminToken, nil, 400, nil)
	h.call(t, "GET", "/v1/admin/groups?summaries=true&summaries=true", e.adminToken, nil, 400, nil)
}

// ptrValue is *p, or nil.
func ptrValue(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}
