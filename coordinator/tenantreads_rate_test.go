package coordinator_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/capgate/capgate/api"
)

// TestTenantReadsSpendTheTenantsRate is redteam14 #3: a tenant's group
// reads had no rate, only two in progress at a time, and one read of a
// large group is thousands of heartbeats' work in the loop (a group of
// 126 members with 1,000 topics each: 18 ms), so a tenant reading it two
// at a time held the loop nearly all the time and every other tenant's
// request waited behind two such reads. A read now spends its tenant's
// tenant_member_rate a token and one more per 100 items it walked (here
// A's group of 2,000 partitions: 21 tokens): within a burst of 40 A's
// second describe is served into debt, its third is 429 naming the rate
// and so is its member's heartbeat (the same tenant), while tenant B reads
// and heartbeats on. Fails without (A's third describe 200).
func TestTenantReadsSpendTheTenantsRate(t *testing.T) {
	e := newEnv(t, map[string]int32{"big": 2000, "small": 1})
	// A token every 1,000 s; A's join spends 2,000 of the burst on the
	// capabilities its answer mints, leaving 40.
	e.cfg.TenantMemberRate, e.cfg.TenantMemberBurst = 0.001, 2040
	h := e.start(t)
	credA := h.clientCredential(t, []string{"ga"}, []string{"big"})
	credB := h.clientCredential(t, []string{"gb"}, []string{"small"})
	a := h.join(t, "ga", credA, api.JoinRequest{SessionTimeoutMs: 300_000, Topics: []string{"big"}})
	b := h.join(t, "gb", credB, api.JoinRequest{SessionTimeoutMs: 300_000, Topics: []string{"small"}})
	for i := range 2 {
		if status, body, _, err := h.try("GET", "/v1/groups/ga", credA, nil); err != nil || status != http.StatusOK {
			t.Fatalf("A's describe %d within its burst: %v %d %.300s", i+1, err, status, body)
		}
	}
	for _, path := range []string{"/v1/groups/ga", "/v1/groups", "/v1/groups/ga/committed"} {
		status, body, header, err := h.try("GET", path, credA, nil)
		if err != nil || status != http.StatusTooManyRequests || limitOf(body) != "coordinator.tenant_member_rate" || header.Get("Retry-After") == "" {
			t.Fatalf("A's GET %s after two describes of 2,000 partitions: %v %d %.300s (Retry-After %q), want 429 naming coordinator.tenant_member_rate",
				path, err, status, body, header.Get("Retry-After"))
		}
	}
	if status, body, _, err := h.try("POST", "/v1/groups/ga/heartbeat", a.token, `{"wait_ms":0}`); err != nil || status != http.StatusTooManyRequests {
		t.Fatalf("A's member's heartbeat after its tenant's reads spent the rate: %v %d %.300s, want 429", err, status, body)
	}
	for _, path := range []string{"/v1/groups/gb", "/v1/groups", "/v1/groups/gb/committed"} {
		if status, body, _, err := h.try("GET", path, credB, nil); err != nil || status != http.StatusOK {
			t.Fatalf("B's GET %s beside A: %v %d %.300s", path, err, status, body)
		}
	}
	b.heartbeat(t, 0)
}

// TestMemberOffsetReadsSpendTheTenantsRate is redteam14 #4: a member's
// GET /v1/groups/{g}/offsets walks every partition of the group and
// answers every committed offset with its metadata (up to 4 KiB each),
// for one token of the tenant's rate — 5,000 such reads a second at the
// defaults. It is now priced as a tenant group read: A's member reading
// its group of 2,000 partitions (21 tokens) twice spends a burst of 40,
// and its third read is 429 naming the rate; B's member reads on. Fails
// without (the third read 200).
func TestMemberOffsetReadsSpendTheTenantsRate(t *testing.T) {
	e := newEnv(t, map[string]int32{"big": 2000, "small": 1})
	// A token every 1,000 s; A's join spends 2,000 of the burst on the
	// capabilities its answer mints, leaving 40.
	e.cfg.TenantMemberRate, e.cfg.TenantMemberBurst = 0.001, 2040
	h := e.start(t)
	a := h.join(t, "ga", h.clientCredential(t, []string{"ga"}, []string{"big"}), api.JoinRequest{SessionTimeoutMs: 300_000, Topics: []string{"big"}})
	b := h.join(t, "gb", h.clientCredential(t, []string{"gb"}, []string{"small"}), api.JoinRequest{SessionTimeoutMs: 300_000, Topics: []string{"small"}})
	for i := range 2 {
		if status, body, _, err := h.try("GET", "/v1/groups/ga/offsets", a.token, nil); err != nil || status != http.StatusOK {
			t.Fatalf("A's member's offsets read %d within its burst: %v %d %.300s", i+1, err, status, body)
		}
	}
	status, body, header, err := h.try("GET", "/v1/groups/ga/offsets", a.token, nil)
	if err != nil || status != http.StatusTooManyRequests || limitOf(body) != "coordinator.tenant_member_rate" || header.Get("Retry-After") == "" {
		t.Fatalf("A's member's third offsets read of 2,000 partitions: %v %d %.300s (Retry-After %q), want 429 naming coordinator.tenant_member_rate",
			err, status, body, header.Get("Retry-After"))
	}
	for range 3 {
		if status, body, _, err := h.try("GET", "/v1/groups/gb/offsets", b.token, nil); err != nil || status != http.StatusOK {
			t.Fatalf("B's member's offsets read beside A: %v %d %.300s", err, status, body)
		}
	}
}

// TestTenantDescribeIsBoundedInBytes is redteam14 #6: a tenant's GET
// /v1/groups/{g} (Kafka's DescribeGroups) was bounded in members (1,000)
// and owned partitions, not in bytes, so one answer carried every
// member's whole subscription — 25 MB for 120 members of 1,000 long topic
// names — held in memory until a reader that reads slowly took it (up to
// write_timeout; the tenant's read place is given back as the handler
// returns). It now stops at describe_bytes_max of estimated JSON, at
// least one member, truncated: true. Fails without (all three members).
func TestTenantDescribeIsBoundedInBytes(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 3})
	e.cfg.DescribeBytesMax = 1024
	h := e.start(t)
	credential := h.clientCredential(t, []string{"g"}, []string{"orders"})
	for i := range 3 {
		h.join(t, "g", credential, api.JoinRequest{SessionTimeoutMs: 300_000, Topics: []string{"orders"}, ClientID: fmt.Sprintf("%d-%s", i, strings.Repeat("c", 200))})
	}
	var d api.TenantGroupDescription
	status, body, _, err := h.try("GET", "/v1/groups/g", credential, nil)
	if err != nil || status != http.StatusOK || json.Unmarshal(body, &d) != nil {
		t.Fatalf("describe: %v %d %.300s", err, status, body)
	}
	if len(d.Members) != 1 || !d.Truncated || len(body) > 2*e.cfg.DescribeBytesMax {
		t.Fatalf("describe within describe_bytes_max %d: %d members, truncated %t, %d bytes; want the first member only, truncated",
			e.cfg.DescribeBytesMax, len(d.Members), d.Truncated, len(body))
	}
}

// TestTruncatedDescribeStillHidesAGroupUsingAHiddenTopic is redteam14 #8:
// a group with a member subscribed to a topic the bearer may not read is
// not described to it at all (redteam11 #1) — but the check read only
// the members a truncated view showed, so with that member past the cut
// (here describe_bytes_max; members_per_group past 1,000 alike) the group
// was described; and the refusal named the topic the bearer may not see.
// Now every member is checked in the loop and the topic is not named.
// Fails without (200, truncated).
func TestTruncatedDescribeStillHidesAGroupUsingAHiddenTopic(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1, "payments-secret": 1})
	e.cfg.DescribeBytesMax = 1 // the first member only
	h := e.start(t)
	reader := h.clientCredential(t, []string{"shared"}, []string{"orders"})
	h.join(t, "shared", reader, api.JoinRequest{SessionTimeoutMs: 300_000, Topics: []string{"orders"}, ClientID: "a-first"})
	h.join(t, "shared", h.clientCredential(t, []string{"shared"}, []string{"orders", "payments-secret"}),
		api.JoinRequest{SessionTimeoutMs: 300_000, Topics: []string{"payments-secret"}, ClientID: "z-past-the-cut"})
	status, body, _, err := h.try("GET", "/v1/groups/shared", reader, nil)
	if err != nil || status != http.StatusForbidden || errorCode(t, body) != api.CodeForbidden {
		t.Fatalf("describe of a group whose member past the cut uses a hidden topic: %v %d %.300s, want 403 forbidden", err, status, body)
	}
	if strings.Contains(string(body), "payments") {
		t.Fatalf("the refusal names the topic the bearer may not see: %s", body)
	}
}

// TestMemberTokenRejoinsSpendTheTenantsRate is redteam14 #9: a rejoin
// fences every partition its member owns (a sync-log entry each, sent to
// every gateway), and rejoins had only join_rate (per member with its
// token) — a tenant fenced ~5 × all it holds a second, outside any
// tenant bound. A rejoin now costs its tenant a token and one per
// partition owned: A's member of 64 partitions rejoins once within a
// burst of 164 (64 spent by its join's capabilities), its second rejoin (with its token or A's credential) is
// 429 naming the rate, and B's member rejoins on. Fails without (the
// second rejoin 200).
func TestMemberTokenRejoinsSpendTheTenantsRate(t *testing.T) {
	e := newEnv(t, map[string]int32{"big": 64, "small": 1})
	e.cfg.TenantMemberRate, e.cfg.TenantMemberBurst = 0.001, 164 // a token every 1,000 s; A's join mints 64
	h := e.start(t)
	credA := h.clientCredential(t, []string{"ga"}, []string{"big"})
	a := h.join(t, "ga", credA, api.JoinRequest{SessionTimeoutMs: 300_000, Topics: []string{"big"}})
	b := h.join(t, "gb", h.clientCredential(t, []string{"gb"}, []string{"small"}), api.JoinRequest{SessionTimeoutMs: 300_000, Topics: []string{"small"}})
	rejoin := func(m *member, topic string) (int, []byte, http.Header) {
		status, body, header, err := h.try("POST", "/v1/groups/"+m.group+"/join", m.token, api.JoinRequest{MemberID: m.id, SessionTimeoutMs: 300_000, Topics: []string{topic}})
		if err != nil {
			t.Fatal(err)
		}
		return status, body, header
	}
	if status, body, _ := rejoin(a, "big"); status != http.StatusOK {
		t.Fatalf("A's first rejoin (65 tokens of the 100 left): %d %.300s", status, body)
	}
	// The rejoin fenced A's partitions and grants them back once the
	// fences are applied: wait until A owns them all again.
	h.awaitOwned(t, "ga", a.id, 64)
	if status, body, header := rejoin(a, "big"); status != http.StatusTooManyRequests || limitOf(body) != "coordinator.tenant_member_rate" || header.Get("Retry-After") == "" {
		t.Fatalf("A's second rejoin, fencing 64 partitions again: %d %.300s (Retry-After %q), want 429 naming coordinator.tenant_member_rate", status, body, header.Get("Retry-After"))
	}
	// With A's client credential naming the member, alike.
	status, body, _, err := h.try("POST", "/v1/groups/ga/join", credA, api.JoinRequest{MemberID: a.id, SessionTimeoutMs: 300_000, Topics: []string{"big"}})
	if err != nil || status != http.StatusTooManyRequests || limitOf(body) != "coordinator.tenant_member_rate" {
		t.Fatalf("A's rejoin with its client credential: %v %d %.300s, want 429 naming coordinator.tenant_member_rate", err, status, body)
	}
	for range 2 {
		if status, body, _ := rejoin(b, "small"); status != http.StatusOK {
			t.Fatalf("B's member's rejoin beside A: %d %.300s", status, body)
		}
	}
}

// A renewal (renew_token) mints a capability again for every partition
// its member owns — an Ed25519 signature each — so it spends the tenant's
// rate as a rejoin does: one token and one per partition owned. With
// join_rate alone a tenant could renew a member of 10,000 partitions
// join_burst (1,000) times at once: ten million signatures (lead).
// Another tenant's renewals are not affected.
func TestRenewalsSpendTheTenantsRate(t *testing.T) {
	e := newEnv(t, map[string]int32{"big": 64, "small": 1})
	e.cfg.TenantMemberRate, e.cfg.TenantMemberBurst = 0.001, 164 // a token every 1,000 s; A's join mints 64
	h := e.start(t)
	credA := h.clientCredential(t, []string{"ga"}, []string{"big"})
	credB := h.clientCredential(t, []string{"gb"}, []string{"small"})
	a := h.join(t, "ga", credA, api.JoinRequest{SessionTimeoutMs: 300_000, Topics: []string{"big"}})
	b := h.join(t, "gb", credB, api.JoinRequest{SessionTimeoutMs: 300_000, Topics: []string{"small"}})
	renew := func(m *member, cred, topic string) (int, []byte) {
		t.Helper()
		status, body, _, err := h.try("POST", "/v1/groups/"+m.group+"/join", cred,
			api.JoinRequest{MemberID: m.id, RenewToken: m.token, SessionTimeoutMs: 300_000, Topics: []string{topic}})
		if err != nil {
			t.Fatal(err)
		}
		if status == http.StatusOK {
			var r api.JoinResponse
			if err := json.Unmarshal(body, &r); err != nil {
				t.Fatal(err)
			}
			m.token = r.MemberToken
		}
		return status, body
	}
	status, body := renew(a, credA, "big")
	if status != http.StatusOK {
		t.Fatalf("A's first renewal (65 tokens of the 100 left): %d %.300s", status, body)
	}
	var r api.JoinResponse
	if err := json.Unmarshal(body, &r); err != nil || len(r.Grants) != 64 {
		t.Fatalf("A's renewal minted %d capabilities (%v), want its 64", len(r.Grants), err)
	}
	if status, body := renew(a, credA, "big"); status != http.StatusTooManyRequests || limitOf(body) != "coordinator.tenant_member_rate" {
		t.Fatalf("A's second renewal, minting 64 capabilities again: %d %.300s, want 429 naming coordinator.tenant_member_rate", status, body)
	}
	for range 2 {
		if status, body := renew(b, credB, "small"); status != http.StatusOK {
			t.Fatalf("B's renewal beside A: %d %.300s", status, body)
		}
	}
}

// The first member of an empty group is granted every partition of its
// topics in its join's answer, a capability — an Ed25519 signature —
// each; a join spent nothing of its tenant's rate, so first joins into a
// tenant's groups (or join–leave cycles, or members left to expire after
// session_timeout_min) had a group of 10,000 partitions signed at
// join_rate, 50 times a second (review21). A join now pays a token per
// capability its answer mints, after the fact, and waits for its
// tenant's debt first: here A's second first-join, 64 capabilities with
// 36 tokens left, is served into debt, and its third is 429 naming the
// rate; tenant B joins on. Fails without (A's third join 200, minting 64).
func TestFirstJoinsSpendTheTenantsRateForWhatTheyMint(t *testing.T) {
	e := newEnv(t, map[string]int32{"big": 64, "small": 1})
	e.cfg.TenantMemberRate, e.cfg.TenantMemberBurst = 0.001, 100 // a token every 1,000 s
	h := e.start(t)
	credA := h.clientCredential(t, []string{"ga-0", "ga-1", "ga-2"}, []string{"big"})
	credB := h.clientCredential(t, []string{"gb"}, []string{"small"})
	req := api.JoinRequest{SessionTimeoutMs: 300_000, Topics: []string{"big"}}
	for i := range 2 {
		if m := h.join(t, fmt.Sprintf("ga-%d", i), credA, req); len(m.grants) != 64 {
			t.Fatalf("A's first member of ga-%d was granted %d partitions, want all 64", i, len(m.grants))
		}
	}
	status, body, _ := h.do(t, "POST", "/v1/groups/ga-2/join", credA, req)
	if status != http.StatusTooManyRequests || limitOf(body) != "coordinator.tenant_member_rate" || !strings.Contains(string(body), "mints") {
		t.Fatalf("A's third first-join, 64 more capabilities in debt: %d %.300s, want 429 naming coordinator.tenant_member_rate", status, body)
	}
	if status, body, _ := h.do(t, "GET", "/v1/admin/groups/ga-2", e.adminToken, nil); status != http.StatusNotFound {
		t.Fatalf("the refused join left group ga-2: %d %.300s", status, body)
	}
	if m := h.join(t, "gb", credB, api.JoinRequest{SessionTimeoutMs: 300_000, Topics: []string{"small"}}); len(m.grants) != 1 {
		t.Fatalf("B's first member beside A was granted %d partitions, want 1", len(m.grants))
	}
}
