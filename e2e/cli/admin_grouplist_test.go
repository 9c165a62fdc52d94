package cli_test

import (
	"slices"
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
// Piped, the JSON carries the names and each group's summary.
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
	rows := map[string]string{}
	table := d.adminCLI(t, "groups", "-o", "table")
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if got := strings.Join(strings.Fields(lines[0]), " "); got != "GROUP STATE MEMBERS PARTITIONS LAG" {
		t.Fatalf("admin groups header %q, want GROUP STATE MEMBERS PARTITIONS LAG:\n%s", got, table)
	}
	for _, l := range lines[1:] {
		if f := strings.Fields(l); len(f) > 0 {
			rows[f[0]] = strings.Join(f, " ")
		}
	}
	for group, want := range map[string]string{"idle": "idle Empty 0 12 3", "live": "live Stable 1 12 5"} {
		if rows[group] != want {
			t.Errorf("admin groups: %s row %q, want %q:\n%s", group, rows[group], want, table)
		}
	}
	var list struct {
		Groups    []string                   `json:"groups"`
		Summaries []coordinator.GroupSummary `json:"summaries"`
	}
	d.adminJSON(t, &list, "groups")
	if !slices.Equal(list.Groups, []string{"idle", "live"}) || len(list.Summaries) != 2 || list.Summaries[1].Members != 1 ||
		list.Summaries[0].Lag == nil || *list.Summaries[0].Lag != 3 {
		t.Errorf("admin groups -o json: %+v, want the names and both summaries", list)
	}
	d.stop(true)
}
