package cli_test

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/coordinator"
)

// TestAdminGroupsListsStateMembersAndLag: `capgate admin groups` lists
// each group with its state, live members, partitions and lag, as rpk
// group list and kafka-consumer-groups --describe --state do — it listed
// names only, and an operator described each group in turn to find the
// one with members or lag (newuser11). A group whose consumer read 2 of
// demo/2's 5 records and left is Empty with lag 3; one with a live member
// that committed nothing (offset_reset earliest) is Stable with lag 5.
// Piped, the JSON carries the names and each group's summary. The
// summaries come with the list, one call for 40 groups: it made one call
// per group (4 at a time), and gave up past 1,000 (newuser12).
func TestAdminGroupsListsStateMembersAndLag(t *testing.T) {
	t.Parallel()
	d := startDev(t, t.TempDir())
	run(t, 30*time.Second, "a\nb\nc\nd\ne\n", d.produceArgs("-p", "2")...)
	run(t, 30*time.Second, "", d.consumeArgs("idle", "-o", "start", "-n", "2")...)
	var joined struct {
		MemberToken string `json:"member_token"`
	}
	if status := httpJSONBody(t, "POST", d.coordinator+"/v1/groups/live/join", d.secret(t, "client_credential"),
		`{"topics":["demo"],"session_timeout_ms":300000}`, &joined); status != 200 || joined.MemberToken == "" {
		t.Fatalf("join: %d", status)
	}
	// More groups, configured before any member joins (Empty, nothing
	// to read): 40 groups cost one call, not one per group.
	admin := d.secret(t, "admin_token")
	for i := range 38 {
		if status := httpJSONBody(t, "PUT", fmt.Sprintf("%s/v1/admin/groups/more-%02d/config", d.coordinator, i), admin, `{"max_moves_per_second":5}`, nil); status != 200 {
			t.Fatalf("configure more-%02d: %d", i, status)
		}
	}
	lists, summaries := routeRequests(t, d.coordinator, "admin_groups"), routeRequests(t, d.coordinator, "admin_group_summary")
	rows := map[string]string{}
	table := d.adminCLI(t, "groups", "-o", "table")
	// Each group's summary came with the list, in one call (40 groups
	// fit a page): it asked for each group's summary in turn (newuser12).
	if n, m := routeRequests(t, d.coordinator, "admin_groups")-lists, routeRequests(t, d.coordinator, "admin_group_summary")-summaries; n != 1 || m != 0 {
		t.Errorf("admin groups of 40 groups: %d list calls and %d summary calls, want 1 and 0", n, m)
	}
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if got := strings.Join(strings.Fields(lines[0]), " "); got != "GROUP STATE MEMBERS PARTITIONS LAG" {
		t.Fatalf("admin groups header %q, want GROUP STATE MEMBERS PARTITIONS LAG:\n%s", got, table)
	}
	for _, l := range lines[1:] {
		if f := strings.Fields(l); len(f) > 0 {
			rows[f[0]] = strings.Join(f, " ")
		}
	}
	for group, want := range map[string]string{"idle": "idle Empty 0 12 3", "live": "live Stable 1 12 5", "more-37": "more-37 Empty 0 0 -"} {
		if rows[group] != want {
			t.Errorf("admin groups: %s row %q, want %q:\n%s", group, rows[group], want, table)
		}
	}
	var list struct {
		Groups    []string                   `json:"groups"`
		Summaries []coordinator.GroupSummary `json:"summaries"`
	}
	d.adminJSON(t, &list, "groups")
	if len(list.Groups) != 40 || !slices.Equal(list.Groups[:2], []string{"idle", "live"}) || len(list.Summaries) != 40 || list.Summaries[1].Members != 1 ||
		list.Summaries[0].Lag == nil || *list.Summaries[0].Lag != 3 || list.Summaries[39].Group != "more-37" || list.Summaries[39].Config.MaxMovesPerSecond != 5 {
		t.Errorf("admin groups -o json: %+v, want the 40 names and their summaries", list)
	}
	d.stop(true)
}

// routeRequests is the coordinator's count of requests to route, all
// outcomes (capgate_coordinator_requests_total).
func routeRequests(t *testing.T, coordinator, route string) int {
	t.Helper()
	resp, err := http.Get(coordinator + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	n := 0
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, "capgate_coordinator_requests_total{") && strings.Contains(l, `route="`+route+`"`) {
			f := strings.Fields(l)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				t.Fatalf("metrics line %q: %v", l, err)
			}
			n += int(v)
		}
	}
	return n
}
