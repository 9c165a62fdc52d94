package coordinator_test

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// TestAdminAuditLog: every admin action — done or refused — is one
// entry of GET /v1/admin/audit (newest first, paged) and one "admin
// action" log line, naming the admin by its token's digest (never the
// token), the action, the target, the reason given and the result;
// reads are not actions.
func TestAdminAuditLog(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 2})
	h := e.start(t)
	gw := newGateway(h, "gw1")
	gw.run(500)
	defer gw.halt()
	creds := h.clientCredential(t, []string{"g"}, []string{"orders"})
	a := h.join(t, "g", creds, api.JoinRequest{Topics: []string{"orders"}})

	h.call(t, "POST", "/v1/admin/groups/g/partitions/orders/1/revoke", e.adminToken, coordinator.RevokeRequest{Reason: "leaked token"}, 200, nil)
	h.expectError(t, "POST", "/v1/admin/groups/nope/partitions/orders/1/revoke", e.adminToken, coordinator.RevokeRequest{Reason: "typo"}, 404, api.CodeNotFound)
	h.call(t, "POST", "/v1/admin/groups/g/members/"+a.id+"/revoke", e.adminToken, coordinator.RevokeRequest{Reason: "compromised host"}, 200, nil)
	h.call(t, "GET", "/v1/admin/groups", e.adminToken, nil, 200, nil) // a read: not recorded
	h.expectError(t, "POST", "/v1/admin/groups/g/partitions/orders/1/revoke", "wrong", nil, 401, api.CodeUnauthorized)

	var page coordinator.AuditResponse
	h.call(t, "GET", "/v1/admin/audit", e.adminToken, nil, 200, &page)
	who := "token:" + coordinator.HashSecret(e.adminToken)[:12]
	want := []coordinator.AuditEntry{
		{Who: who, Action: "member_revoke", Target: "g/" + a.id, Reason: "compromised host", Result: "ok", Status: 200},
		{Who: who, Action: "partition_revoke", Target: "nope/orders/1", Reason: "typo", Result: "not_found", Status: 404},
		{Who: who, Action: "partition_revoke", Target: "g/orders/1", Reason: "leaked token", Result: "ok", Status: 200},
		{Who: who, Action: "clients", Target: "client:svc", Result: "ok", Status: 200},
	}
	if len(page.Entries) != len(want) {
		t.Fatalf("audit log %+v, want %d entries", page.Entries, len(want))
	}
	oldest := page.Entries[len(want)-1].Seq
	for i, w := range want {
		got := page.Entries[i]
		if got.At == "" || got.Seq != oldest+uint64(len(want)-1-i) {
			t.Errorf("entry %d: %+v: want seq %d (one more per entry) and a time", i, got, oldest+uint64(len(want)-1-i))
		}
		got.At, got.Seq = "", 0
		if got != w {
			t.Errorf("entry %d: %+v, want %+v", i, got, w)
		}
	}
	// Paging: one at a time, older ones through next_before.
	var first, second coordinator.AuditResponse
	h.call(t, "GET", "/v1/admin/audit?limit=1", e.adminToken, nil, 200, &first)
	h.call(t, "GET", fmt.Sprintf("/v1/admin/audit?limit=1&before=%d", first.NextBefore), e.adminToken, nil, 200, &second)
	if len(first.Entries) != 1 || first.NextBefore != oldest+3 || len(second.Entries) != 1 || second.Entries[0].Seq != oldest+2 {
		t.Fatalf("pages %+v then %+v", first, second)
	}
	h.expectError(t, "GET", "/v1/admin/audit?before=x", e.adminToken, nil, 400, api.CodeBadRequest)

	lines := e.logs.FilterMessage("admin action").All()
	if len(lines) != len(want) {
		t.Fatalf("%d admin action log lines, want %d", len(lines), len(want))
	}
	fields := lines[1].ContextMap()
	if fields["who"] != who || fields["action"] != "partition_revoke" || fields["reason"] != "leaked token" || fields["result"] != "ok" {
		t.Fatalf("log line %v", fields)
	}
	if lines[2].Level.String() != "warn" || lines[3].Level.String() != "info" {
		t.Fatalf("levels %s %s: a refused action warns", lines[2].Level, lines[3].Level)
	}
	e.checkLogs(t)
}

// TestAdminAuditLogBounded: the memory log keeps the newest
// audit_entries_max entries.
func TestAdminAuditLogBounded(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	e.cfg.AuditEntriesMax = 3
	h := e.start(t)
	for i := range 5 {
		h.call(t, "PUT", "/v1/admin/groups/g"+fmt.Sprint(i)+"/config", e.adminToken, coordinator.GroupConfigRequest{}, 200, nil)
	}
	var page coordinator.AuditResponse
	h.call(t, "GET", "/v1/admin/audit", e.adminToken, nil, 200, &page)
	if len(page.Entries) != 3 || page.Entries[0].Target != "g4" || page.Entries[2].Target != "g2" || page.NextBefore != 0 {
		t.Fatalf("bounded log %+v", page)
	}
	// A reason is kept up to 256 bytes, cut on a character boundary.
	long := strings.Repeat("é", 200) // 400 bytes
	h.call(t, "POST", "/v1/admin/capabilities/AAAAAAAAAAAAAAAAAAAAAA/revoke", e.adminToken, coordinator.DenyRequest{Reason: long}, 200, nil)
	h.call(t, "GET", "/v1/admin/audit?limit=1", e.adminToken, nil, 200, &page)
	if r := page.Entries[0].Reason; len(r) != 256 || !utf8.ValidString(r) || !strings.HasPrefix(long, r) {
		t.Fatalf("kept reason of %d bytes: %q", len(r), r)
	}
}

// TestAdminAuditSeqsGoOnAcrossRestarts: the memory log starts empty when
// the coordinator starts again (the "admin action" log lines are the
// durable record), and its seqs go on above every seq of the earlier
// run, so a before= taken before the restart pages into nothing of the
// new history. Seqs started again at 1: before=3 from the first run
// listed the second run's entries 1 and 2 as if they were older.
func TestAdminAuditSeqsGoOnAcrossRestarts(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	h := e.start(t)
	for i := range 3 {
		h.call(t, "PUT", "/v1/admin/groups/first"+fmt.Sprint(i)+"/config", e.adminToken, coordinator.GroupConfigRequest{}, 200, nil)
	}
	var first coordinator.AuditResponse
	h.call(t, "GET", "/v1/admin/audit", e.adminToken, nil, 200, &first)
	if len(first.Entries) != 3 {
		t.Fatalf("first run: %+v", first.Entries)
	}
	h.stop(t)

	h = e.start(t)
	for i := range 2 {
		h.call(t, "PUT", "/v1/admin/groups/second"+fmt.Sprint(i)+"/config", e.adminToken, coordinator.GroupConfigRequest{}, 200, nil)
	}
	var second coordinator.AuditResponse
	h.call(t, "GET", "/v1/admin/audit", e.adminToken, nil, 200, &second)
	if len(second.Entries) != 2 || second.Entries[1].Target != "second0" {
		t.Fatalf("second run: %+v, want its own 2 entries (the memory log starts empty)", second.Entries)
	}
	if newest, oldest := first.Entries[0].Seq, second.Entries[1].Seq; oldest <= newest {
		t.Fatalf("the second run's first seq %d is not above the first run's last %d", oldest, newest)
	}
	var paged coordinator.AuditResponse
	h.call(t, "GET", fmt.Sprintf("/v1/admin/audit?before=%d", first.Entries[0].Seq), e.adminToken, nil, 200, &paged)
	if len(paged.Entries) != 0 || paged.NextBefore != 0 {
		t.Fatalf("before=%d from the first run paged into the second: %+v", first.Entries[0].Seq, paged)
	}
}
