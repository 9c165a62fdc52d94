package coordinator_test

import (
	"fmt"
	"html"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The console's groups page over HTTP with a logged-in session: paging
// and the name filter (redteam2 I: it listed the first 100 groups, then
// "and N more groups not listed", with no way to the rest but typing
// /console/groups/<name>).

var (
	groupRow     = regexp.MustCompile(`<tr data-group="([^"]*)">`)
	nextPageLink = regexp.MustCompile(`<a href="([^"]*)" id="next-page"`)
)

// groupsPage reads one groups page: its groups, in order, and the next
// page's path ("" when none).
func groupsPage(t *testing.T, c *consoleClient, path string) (names []string, next string, body string) {
	t.Helper()
	page := c.send("GET", path, nil, nil)
	if page.status != 200 {
		t.Fatalf("GET %s: %d\n%s", path, page.status, page.body)
	}
	for _, m := range groupRow.FindAllStringSubmatch(page.body, -1) {
		names = append(names, html.UnescapeString(m[1]))
	}
	if m := nextPageLink.FindStringSubmatch(page.body); m != nil {
		next = html.UnescapeString(m[1])
	}
	return names, next, page.body
}

// walkGroups follows next-page links from path and returns every group
// listed and the number of pages.
func walkGroups(t *testing.T, c *consoleClient, path string) ([]string, int) {
	t.Helper()
	var all []string
	pages := 0
	for path != "" {
		names, next, body := groupsPage(t, c, path)
		if pages++; pages > 20 {
			t.Fatal("more than 20 pages")
		}
		if len(names) > 100 {
			t.Fatalf("%s: %d groups on one page", path, len(names))
		}
		if pages > 1 && !strings.Contains(body, `id="first-page"`) {
			t.Fatalf("%s: no link back to the first page", path)
		}
		all = append(all, names...)
		path = next
	}
	return all, pages
}

// TestConsoleGroupsPages: with more groups than a page holds (and admin
// pages smaller than the console's: describe_page_max 7), following the
// next-page links reaches every group exactly once, in name order; a
// prefix filter pages the same way through exactly the groups starting
// with it (the prefix itself, a group here, included); the links keep the
// filter. Fails without paging: the first page had no next-page link.
func TestConsoleGroupsPages(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	e.cfg.DescribePageMax = 7
	h := e.start(t)
	var want, orders []string
	for i := range 150 {
		want = append(want, fmt.Sprintf("bulk-%03d", i))
	}
	orders = append(orders, "orders")
	for i := range 110 {
		orders = append(orders, fmt.Sprintf("orders-%03d", i))
	}
	want = append(want, orders...)
	want = append(want, "ordersx", "zeta-1", "zeta-2")
	for _, g := range want {
		h.call(t, "PUT", "/v1/admin/groups/"+url.PathEscape(g)+"/config", e.adminToken, map[string]any{"max_moves_per_second": 5}, 200, nil)
	}
	slices.Sort(want)
	c := newConsoleClient(t, h)
	if a := c.login(e.adminToken, nil); a.status != 303 {
		t.Fatalf("login: %d", a.status)
	}

	got, pages := walkGroups(t, c, "/console/groups")
	if !slices.Equal(got, want) || pages != 3 {
		t.Fatalf("paging every group: %d groups on %d pages, want %d on 3; first differences: %v", len(got), pages, len(want), firstDiff(got, want))
	}

	// orders-* and orders itself, not ordersx? ordersx starts with
	// "orders" too: the prefix is a plain prefix.
	wantOrders := append(slices.Clone(orders), "ordersx")
	got, pages = walkGroups(t, c, "/console/groups?prefix=orders")
	if !slices.Equal(got, wantOrders) || pages != 2 {
		t.Fatalf("prefix orders: %d groups on %d pages, want %d on 2; first differences: %v", len(got), pages, len(wantOrders), firstDiff(got, wantOrders))
	}
	got, _ = walkGroups(t, c, "/console/groups?prefix=orders-&after=orders-049")
	if !slices.Equal(got, orders[51:]) {
		t.Fatalf("prefix orders- after orders-049: %v…, want %d from orders-050", got[:min(3, len(got))], len(orders[51:]))
	}
	// The form's empty prefix is no filter: the page sends the browser
	// to its URL without the empty fields (console7), which lists every
	// group; a cursor before the prefix starts at the prefix; nothing
	// matching is an empty page.
	if a := c.send("GET", "/console/groups?prefix=&after=", nil, nil); a.status != 303 || a.header.Get("Location") != "/console/groups" {
		t.Fatalf("empty prefix and after: %d → %q, want 303 to /console/groups", a.status, a.header.Get("Location"))
	}
	if got, _ := walkGroups(t, c, "/console/groups"); !slices.Equal(got, want) {
		t.Fatalf("no filter: %d groups", len(got))
	}
	if got, _, _ := groupsPage(t, c, "/console/groups?prefix=zeta&after=a"); !slices.Equal(got, []string{"zeta-1", "zeta-2"}) {
		t.Fatalf("prefix zeta after a: %v", got)
	}
	if got, _, body := groupsPage(t, c, "/console/groups?prefix=nothing-here"); len(got) != 0 || !strings.Contains(body, "no group starts with nothing-here") {
		t.Fatalf("a prefix matching nothing: %v\n%s", got, body)
	}
}

// TestConsoleGroupsPageRefusesBadQueries: a prefix or cursor that is no
// group name by the admin API's rule (ocap.ValidName), a repeated or
// unknown parameter: the console's error page with 400, never a 500; a
// name that is valid but hostile is shown as text.
func TestConsoleGroupsPageRefusesBadQueries(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	h := e.start(t)
	h.call(t, "PUT", "/v1/admin/groups/g1/config", e.adminToken, map[string]any{"max_moves_per_second": 5}, 200, nil)
	c := newConsoleClient(t, h)
	if a := c.login(e.adminToken, nil); a.status != 303 {
		t.Fatalf("login: %d", a.status)
	}
	long := strings.Repeat("a", 256)
	for _, q := range []string{
		"after=a%20b", "after=a/b", "after=..", "after=%00", "after=%C3%A9", "after=" + long,
		"prefix=a%20b", "prefix=x/", "prefix=.", "prefix=%7F",
		"after=a&after=b", "prefix=a&prefix=a", "limit=5", "page=2",
	} {
		a := c.send("GET", "/console/groups?"+q, nil, nil)
		if a.status != 400 || !strings.HasPrefix(a.header.Get("Content-Type"), "text/html") ||
			!strings.Contains(a.body, `<p class="error">`) || !strings.Contains(a.header.Get("Content-Security-Policy"), "script-src 'self'") {
			t.Errorf("?%s: %d %q, want the error page with 400\n%s", q, a.status, a.header.Get("Content-Type"), a.body)
		}
	}
	hostile := `x"onfocus="alert(1)"'><i>x<script>alert(1)<` // valid: printable, no space, no '/'
	a := c.send("GET", "/console/groups?after="+url.QueryEscape(hostile)+"&prefix="+url.QueryEscape(hostile), nil, nil)
	if a.status != 200 || strings.Contains(a.body, hostile) || !strings.Contains(a.body, html.EscapeString(hostile)) ||
		strings.Count(a.body, "<script") != 1 { // console.js only
		t.Fatalf("a hostile valid name: %d\n%s", a.status, a.body)
	}
}

func firstDiff(got, want []string) string {
	for i := range max(len(got), len(want)) {
		if i >= len(got) || i >= len(want) || got[i] != want[i] {
			return fmt.Sprintf("at %d: got %q, want %q", i, got[i:min(i+3, len(got))], want[i:min(i+3, len(want))])
		}
	}
	return "none"
}

// TestConsoleGroupsPageReadsOneList: the groups page reads its groups'
// lines with one admin list (GET /v1/admin/groups?summaries=true), not
// the names and then each group's summary — 101 admin reads a re-read
// of 100 groups, each a read on the loop and a sum of its lag
// (newuser12; BENCHMARKS.md §15). Fails without: 30 summary reads.
func TestConsoleGroupsPageReadsOneList(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	h := e.start(t)
	for i := range 30 {
		h.call(t, "PUT", fmt.Sprintf("/v1/admin/groups/g-%02d/config", i), e.adminToken, map[string]any{"max_moves_per_second": 5}, 200, nil)
	}
	c := newConsoleClient(t, h)
	if a := c.login(e.adminToken, nil); a.status != 303 {
		t.Fatalf("login: %d", a.status)
	}
	const lists, summaries = `capgate_coordinator_requests_total{code="ok",route="admin_groups"}`, `capgate_coordinator_requests_total{code="ok",route="admin_group_summary"}`
	listsBefore, summariesBefore := max(h.metric(t, lists), 0), max(h.metric(t, summaries), 0)
	page := c.send("GET", "/console/groups", nil, nil)
	if page.status != 200 || !strings.Contains(page.body, `data-group="g-29"`) {
		t.Fatalf("groups page: %d, want g-29 listed:\n%s", page.status, page.body)
	}
	if l, s := h.metric(t, lists)-listsBefore, max(h.metric(t, summaries), 0)-summariesBefore; l != 1 || s != 0 {
		t.Errorf("the groups page of 30 groups: %v list reads and %v summary reads, want 1 and 0", l, s)
	}
}
