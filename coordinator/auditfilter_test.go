package coordinator_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// TestAdminAuditFilters (newuser #11): capgate produce's minting (a
// capability per partition written, holder capgate-produce) buries an
// operator's actions; GET /v1/admin/audit takes action, who, target
// (a prefix), exclude_action and exclude_target (a prefix) — a filter
// parameter once per value — and pages through what they keep only:
// next_before never leads past the last kept entry.
func TestAdminAuditFilters(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 4})
	other, otherHash, err := coordinator.GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	e.remember(other)
	e.cfg.AdminTokenHashes = append(e.cfg.AdminTokenHashes, otherHash)
	h := e.start(t)
	mint := func(p int32) {
		h.call(t, "POST", "/v1/admin/capabilities", e.adminToken, coordinator.SharedGrantRequest{
			Topic: "orders", Partition: p, Ops: []string{"produce"}, TTLMs: 60_000, Holder: "capgate-produce"}, 200, nil)
	}
	// Oldest first: produce's mints around two operators' actions, a
	// mint the oldest entry of all.
	mint(0)
	h.call(t, "PUT", "/v1/admin/groups/billing/config", e.adminToken, coordinator.GroupConfigRequest{}, 200, nil)
	mint(1)
	h.call(t, "POST", "/v1/admin/capabilities/AAAAAAAAAAAAAAAAAAAAAA/revoke", other, coordinator.DenyRequest{Reason: "leaked"}, 200, nil)
	h.call(t, "POST", "/v1/admin/capabilities", other, coordinator.SharedGrantRequest{
		Topic: "orders", Partition: 2, Ops: []string{"fetch"}, TTLMs: 60_000, Holder: "auditor"}, 200, nil)
	mint(2)
	h.call(t, "PUT", "/v1/admin/groups/billing-eu/config", e.adminToken, coordinator.GroupConfigRequest{}, 200, nil)
	mint(3)

	targets := func(query string) []string {
		t.Helper()
		var page coordinator.AuditResponse
		h.call(t, "GET", "/v1/admin/audit?"+query, e.adminToken, nil, 200, &page)
		if page.NextBefore != 0 {
			t.Fatalf("%s: next_before %d with every entry on the page", query, page.NextBefore)
		}
		out := []string{}
		for _, en := range page.Entries {
			out = append(out, en.Action+" "+en.Target)
		}
		return out
	}
	me, them := "token:"+coordinator.HashSecret(e.adminToken)[:12], "token:"+coordinator.HashSecret(other)[:12]
	for query, want := range map[string][]string{
		"exclude_target=capgate-produce@": {"group_config billing-eu", "capabilities auditor@orders/2", "capability_revoke AAAAAAAAAAAAAAAAAAAAAA", "group_config billing"},
		"exclude_action=capabilities":     {"group_config billing-eu", "capability_revoke AAAAAAAAAAAAAAAAAAAAAA", "group_config billing"},
		"action=capabilities&target=capgate-produce@orders/": {"capabilities capgate-produce@orders/3", "capabilities capgate-produce@orders/2",
			"capabilities capgate-produce@orders/1", "capabilities capgate-produce@orders/0"},
		"action=group_config&action=capability_revoke":                                            {"group_config billing-eu", "capability_revoke AAAAAAAAAAAAAAAAAAAAAA", "group_config billing"},
		"who=" + url.QueryEscape(them):                                                            {"capabilities auditor@orders/2", "capability_revoke AAAAAAAAAAAAAAAAAAAAAA"},
		"who=" + url.QueryEscape(me) + "&exclude_target=capgate-produce@&exclude_target=billing-": {"group_config billing"},
		"target=billing":              {"group_config billing-eu", "group_config billing"},
		"target=billing,x&target=x,y": {}, // a comma is part of a value
		"action=nope":                 {},
	} {
		if got := targets(query); !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %q\nwant %q", query, got, want)
		}
	}

	// Paging under a filter: one kept entry a page, through next_before,
	// walks exactly the kept entries; the last page (older entries are
	// kept in the ring, but none that passes) says no more.
	var walked []string
	path := "/v1/admin/audit?limit=1&exclude_target=capgate-produce@"
	for next := ""; ; {
		var page coordinator.AuditResponse
		h.call(t, "GET", path+next, e.adminToken, nil, 200, &page)
		if len(page.Entries) != 1 {
			t.Fatalf("after %q: a page of %d entries (%+v); want 1: next_before leads to a kept entry", walked, len(page.Entries), page)
		}
		for _, en := range page.Entries {
			walked = append(walked, en.Action+" "+en.Target)
		}
		if page.NextBefore == 0 {
			break
		}
		if len(walked) > 10 {
			t.Fatalf("paging does not end: %q", walked)
		}
		next = fmt.Sprintf("&before=%d", page.NextBefore)
	}
	if want := targets("exclude_target=capgate-produce@"); !reflect.DeepEqual(walked, want) {
		t.Fatalf("paged one at a time: %q, want %q", walked, want)
	}
}

// TestAdminAuditFilterRefusals: a filter value is bounded (16 values a
// parameter, 256 bytes a value, not empty), before and limit come once,
// and an unknown parameter is named: 400 bad_request naming the
// parameter, with the API's error body.
func TestAdminAuditFilterRefusals(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	h := e.start(t)
	sixteen := strings.Repeat("&action=a", 16)
	h.call(t, "GET", "/v1/admin/audit?"+sixteen[1:]+"&target="+strings.Repeat("t", 256), e.adminToken, nil, 200, nil)
	for query, want := range map[string]string{
		sixteen[1:] + "&action=b":                    "action: at most 16 values",
		"exclude_target=" + strings.Repeat("t", 257): "exclude_target: a value is at most 256 bytes, got 257",
		"who=":              "who must not be empty",
		"exclude_action=":   "exclude_action must not be empty",
		"limit=1&limit=2":   "query parameter limit given more than once",
		"before=1&before=1": "query parameter before given more than once",
		"limit=0":           "limit must be a decimal integer from 1 to",
		"before=01":         "before must be an entry's seq",
		"actions=x":         `unknown query parameter "actions"; allowed: before, limit, action, who, target, exclude_action, exclude_target`,
	} {
		status, body, _ := h.do(t, "GET", "/v1/admin/audit?"+query, e.adminToken, nil)
		var eb api.ErrorBody
		if err := json.Unmarshal(body, &eb); err != nil || status != 400 || eb.Error.Code != api.CodeBadRequest || !strings.Contains(eb.Error.Message, want) {
			t.Errorf("%.60s: %d %s; want 400 bad_request saying %q", query, status, body, want)
		}
	}
}
