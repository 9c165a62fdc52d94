package coordinator_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/capgate/capgate/api"
)

// TestMetricsNameNoGroupByDefault: the attack is reading other tenants'
// group names, and how far behind each is, from /metrics, which answers
// without a token — capgate_coordinator_group_lag{group="…"} listed the
// 100 groups of the largest lag while the API answers the same caller
// 403 for those groups. By default no group is named (the lag of all is
// capgate_coordinator_group_lag_rest); an operator who sets
// group_lag_labels_max gets the per-group series.
func TestMetricsNameNoGroupByDefault(t *testing.T) {
	const group = "tenant-a-payroll"
	scrape := func(labels int) string {
		t.Helper()
		e := newEnv(t, map[string]int32{"orders": 1})
		e.fill(t, 3)
		if labels >= 0 {
			e.cfg.GroupLagLabelsMax = labels
		}
		h := e.start(t)
		creds := h.clientCredential(t, []string{group}, []string{"orders"})
		h.join(t, group, creds, api.JoinRequest{Topics: []string{"orders"}})
		status, body, _ := h.do(t, "GET", "/metrics", "", nil) // no token: anyone
		if status != http.StatusOK {
			t.Fatalf("GET /metrics: %d", status)
		}
		if rest := h.metric(t, "capgate_coordinator_group_lag_rest"); labels <= 0 && rest != 3 {
			t.Errorf("group_lag_labels_max %d: capgate_coordinator_group_lag_rest %v, want the group's lag, 3", labels, rest)
		}
		return string(body)
	}

	if body := scrape(-1); strings.Contains(body, group) || strings.Contains(body, "capgate_coordinator_group_lag{") {
		t.Errorf("/metrics with the default config names a tenant's group:\n%s", grep(body, "group_lag"))
	}
	if body := scrape(10); !strings.Contains(body, `capgate_coordinator_group_lag{group="`+group+`"} 3`) {
		t.Errorf("group_lag_labels_max 10: no series for the group:\n%s", grep(body, "group_lag"))
	}
}

// grep is the lines of text holding s.
func grep(text, s string) string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
