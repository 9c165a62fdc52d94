package coordinator_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/capgate/capgate/api"
)

// keyedJoin posts a join with the Idempotency-Key header lines keys and
// returns the status and body.
func (h *harness) keyedJoin(t testing.TB, group, credential string, req api.JoinRequest, keys ...string) (int, []byte) {
	t.Helper()
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	hr, err := http.NewRequest("POST", h.base+"/v1/groups/"+group+"/join", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	hr.Header.Set("Authorization", "Bearer "+credential)
	hr.Header.Set("Content-Type", "application/json")
	for _, k := range keys {
		hr.Header.Add(api.HeaderIdempotencyKey, k)
	}
	resp, err := h.client.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out
}

func (h *harness) mustKeyedJoin(t testing.TB, credential string, req api.JoinRequest, key string) api.JoinResponse {
	t.Helper()
	return h.mustKeyedJoinIn(t, "keyed", credential, req, key)
}

// mustKeyedJoinIn is mustKeyedJoin into group.
func (h *harness) mustKeyedJoinIn(t testing.TB, group, credential string, req api.JoinRequest, key string) api.JoinResponse {
	t.Helper()
	status, b := h.keyedJoin(t, group, credential, req, key)
	if status != http.StatusOK {
		t.Fatalf("join with key %q: %d %s", key, status, b)
	}
	var resp api.JoinResponse
	if err := json.Unmarshal(b, &resp); err != nil {
		t.Fatal(err)
	}
	h.env.remember(resp.MemberToken)
	return resp
}

// A join's attempts carry one Idempotency-Key: a repeat (an attempt given
// up on a slow leader that wrote it anyway, then sent again) is answered
// the member the first made, so the group has one member, not a second
// that nobody heartbeats holding half the partitions until its session
// ran out. The key is the credential's: another credential sending the
// same key gets its own member. A bad key is 400 naming the header,
// and makes no member. A key expires with its member: once the member's
// session ran out, the repeat joins a new one.
func TestJoinKeyAnswersTheSameMember(t *testing.T) {
	e := newEnv(t, map[string]int32{"demo": 4})
	h := e.start(t)
	credA := h.clientCredential(t, []string{"keyed"}, []string{"demo"})
	credB := h.clientCredential(t, []string{"keyed"}, []string{"demo"})
	req := api.JoinRequest{Topics: []string{"demo"}, ClientID: "svc", SessionTimeoutMs: 60_000}

	first := h.mustKeyedJoin(t, credA, req, `"7d0e1c52-4ab8-4f34-9d43-6e0d6f2f8c11"`)
	again := h.mustKeyedJoin(t, credA, req, `7d0e1c52-4ab8-4f34-9d43-6e0d6f2f8c11`) // the bare form names the same key
	if again.MemberID != first.MemberID {
		t.Fatalf("repeat with the key: member %s, the first made %s", again.MemberID, first.MemberID)
	}
	if d := h.describe(t, "keyed"); len(d.Members) != 1 {
		t.Fatalf("%d members after a repeated join, want 1: %+v", len(d.Members), d.Members)
	}
	m := &member{h: h, group: "keyed", id: again.MemberID, token: again.MemberToken, grants: map[string]api.Grant{}}
	m.heartbeat(t, 0) // the repeat's member token is the member's

	other := h.mustKeyedJoin(t, credB, req, "7d0e1c52-4ab8-4f34-9d43-6e0d6f2f8c11")
	if other.MemberID == first.MemberID {
		t.Fatalf("another credential's same key joined member %s, the first credential's", other.MemberID)
	}
	if d := h.describe(t, "keyed"); len(d.Members) != 2 {
		t.Fatalf("%d members, want 2: %+v", len(d.Members), d.Members)
	}

	for name, keys := range map[string][]string{
		"twice":     {"a", "b"},
		"empty":     {`""`},
		"space":     {"a b"},
		"backslash": {`a\b`},
		"too long":  {strings.Repeat("k", api.JoinKeyMax+1)},
	} {
		status, b := h.keyedJoin(t, "keyed", credA, req, keys...)
		var body api.ErrorBody
		if err := json.Unmarshal(b, &body); err != nil || status != http.StatusBadRequest || body.Error.Code != api.CodeBadRequest ||
			body.Error.Details["header"] != api.HeaderIdempotencyKey {
			t.Fatalf("%s: %d %s, want 400 bad_request naming the header", name, status, b)
		}
	}
	if d := h.describe(t, "keyed"); len(d.Members) != 2 {
		t.Fatalf("%d members after refused joins, want 2: %+v", len(d.Members), d.Members)
	}

	short := req
	short.SessionTimeoutMs = e.cfg.Groups.SessionTimeoutMin.Milliseconds()
	gone := h.mustKeyedJoin(t, credA, short, "short")
	eventually(t, func() string {
		for _, mem := range h.describe(t, "keyed").Members {
			if mem.ID == gone.MemberID {
				return fmt.Sprintf("member %s not expired yet", gone.MemberID)
			}
		}
		return ""
	})
	late := h.mustKeyedJoin(t, credA, short, "short") // a new member, under the key's id again
	if late.MemberID != gone.MemberID {
		t.Fatalf("repeat past expiry joined %s, want the key's id %s", late.MemberID, gone.MemberID)
	}
	if d := h.describe(t, "keyed"); len(d.Members) != 3 {
		t.Fatalf("%d members after the repeat past expiry, want 3: %+v", len(d.Members), d.Members)
	}
}

// TestRepeatedJoinKeySpendsTheTenantsRate: a keyed join repeated while
// its member lives is that member's rejoin and fences every partition it
// owns, so it spends the tenant's rate as a rejoin does (a token and one
// per partition), not one join_rate place: a client sending one key over
// and over fenced all its member holds at join_rate, outside the bound
// redteam14 put on rejoins. A's member of 64 partitions: the first join
// spends the 64 capabilities it mints of a burst of 164, the first repeat 65, the second is
// 429 naming the rate; B's keyed joins go on. Fails without (the second
// repeat 200).
func TestRepeatedJoinKeySpendsTheTenantsRate(t *testing.T) {
	e := newEnv(t, map[string]int32{"big": 64, "small": 1})
	e.cfg.TenantMemberRate, e.cfg.TenantMemberBurst = 0.001, 164 // a token every 1,000 s; the first join mints 64
	h := e.start(t)
	credA := h.clientCredential(t, []string{"keyed"}, []string{"big"})
	credB := h.clientCredential(t, []string{"keyed"}, []string{"small"})
	req := api.JoinRequest{SessionTimeoutMs: 300_000, Topics: []string{"big"}}
	first := h.mustKeyedJoin(t, credA, req, "k-1")
	ownsAll := func() { h.awaitOwned(t, "keyed", first.MemberID, 64) }
	ownsAll()
	if again := h.mustKeyedJoin(t, credA, req, "k-1"); again.MemberID != first.MemberID {
		t.Fatalf("the repeat answered member %s, want %s", again.MemberID, first.MemberID)
	}
	ownsAll()
	status, body := h.keyedJoin(t, "keyed", credA, req, "k-1")
	if status != http.StatusTooManyRequests || limitOf(body) != "coordinator.tenant_member_rate" {
		t.Fatalf("A's second repeat, fencing 64 partitions again: %d %.300s, want 429 naming coordinator.tenant_member_rate", status, body)
	}
	for _, key := range []string{"kb-1", "kb-1"} {
		h.mustKeyedJoin(t, credB, api.JoinRequest{SessionTimeoutMs: 300_000, Topics: []string{"small"}}, key)
	}
}

// TestFirstKeyedJoinSpendsNoRate: a keyed join that names no live member
// of its tenant is a first attempt, no rejoin — it spends nothing of the
// tenant's rate beyond the capabilities its answer mints, as a join
// without a key does. Every SDK and Kafka listener join carries a key:
// priced as a rejoin of nothing, each was 429 "a rejoin fences each
// partition its member owns (0)" while its tenant's bucket was empty
// (here: the first member's four capabilities and a group listing took
// the five tokens), and the same join without a key 200. Fails without
// (the first keyed join priced as a rejoin too: the listing 429).
func TestFirstKeyedJoinSpendsNoRate(t *testing.T) {
	e := newEnv(t, map[string]int32{"big": 4})
	e.cfg.TenantMemberRate, e.cfg.TenantMemberBurst = 0.001, 5 // five tokens, the next in 1,000 s
	h := e.start(t)
	credA := h.clientCredential(t, []string{"keyed"}, []string{"big"})
	req := api.JoinRequest{SessionTimeoutMs: 300_000, Topics: []string{"big"}}
	first := h.mustKeyedJoin(t, credA, req, "k-1") // granted all four partitions: four tokens
	if status, body, _, err := h.try("GET", "/v1/groups", credA, nil); err != nil || status != http.StatusOK {
		t.Fatalf("A's group listing (the bucket's last token, the first keyed join having spent only its four capabilities): %v %d %.300s", err, status, body)
	}
	for _, key := range []string{"k-2", "k-3"} { // the partitions are k-1's: nothing minted
		if next := h.mustKeyedJoin(t, credA, req, key); next.MemberID == first.MemberID {
			t.Fatalf("key %s joined the first key's member %s", key, first.MemberID)
		}
	}
	// A repeat is the rejoin it is, priced as one (the bucket is empty).
	if status, body := h.keyedJoin(t, "keyed", credA, req, "k-1"); status != http.StatusTooManyRequests || limitOf(body) != "coordinator.tenant_member_rate" {
		t.Fatalf("a repeat of k-1 with the bucket empty: %d %.300s, want 429 naming coordinator.tenant_member_rate", status, body)
	}
}

// TestJoinKeyOutlivesATokenRefresh: an OAuth client's token refreshed
// between two attempts of one join (each /oauth/token credential has its
// own jti) — the second attempt, same Idempotency-Key, is answered the
// member the first made: one member, its new member token heartbeats,
// and it is bound to the new token from then on (denying the first
// token leaves it, denying the second ends it). Another OAuth client's
// same key makes its own member; so does the refreshed client's after
// the member's token was denied (the deny ended it; the revocation of
// its id still runs). Fails without (a second member, the first an
// orphan until its session ran out).
func TestJoinKeyOutlivesATokenRefresh(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 4})
	h := e.start(t)
	billing := createOAuthClient(t, h, "billing", []string{"g"})
	other := createOAuthClient(t, h, "other", []string{"g"})
	req := api.JoinRequest{Topics: []string{"orders"}, ClientID: "svc", SessionTimeoutMs: 300_000}
	join := func(credential, key string) api.JoinResponse {
		t.Helper()
		return h.mustKeyedJoinIn(t, "g", credential, req, key)
	}
	first := oauthToken(t, e, h, billing)
	made := join(first, "k-1")
	second := oauthToken(t, e, h, billing) // refreshed before the attempt the client sends next
	if claimsOf(t, second)["jti"] == claimsOf(t, first)["jti"] {
		t.Fatal("the refreshed token has the first one's jti")
	}
	again := join(second, "k-1")
	if again.MemberID != made.MemberID {
		t.Fatalf("the repeat with the refreshed token joined member %s, the first attempt made %s", again.MemberID, made.MemberID)
	}
	if d := h.describe(t, "g"); len(d.Members) != 1 {
		t.Fatalf("%d members after the repeat, want 1: %+v", len(d.Members), d.Members)
	}
	m := &member{h: h, group: "g", id: again.MemberID, token: again.MemberToken, grants: map[string]api.Grant{}}
	m.heartbeat(t, 0)
	checkRebound(t, e, h, first, second, "")

	mine := join(oauthToken(t, e, h, other), "k-1")
	if mine.MemberID == made.MemberID {
		t.Fatalf("another OAuth client's same key joined %s, billing's member", mine.MemberID)
	}
	late := join(oauthToken(t, e, h, billing), "k-1")
	if late.MemberID == made.MemberID {
		t.Fatalf("a refreshed token's repeat after the member's token was denied joined the revoked member's id %s", late.MemberID)
	}
	if d := h.describe(t, "g"); len(d.Members) != 2 {
		t.Fatalf("%d members, want 2 (other's, billing's new one): %+v", len(d.Members), d.Members)
	}
}

// TestRefreshedTokensRepeatSpendsTheTenantsRate: a keyed join repeated
// with a refreshed token of the same OAuth client is its member's rejoin
// (the key is the tenant's) and fences all the member owns, so the shell
// prices it as one, naming the member by the same tenant-scoped id the
// machine computes. Priced by the token's jti, the repeat named no live
// member and spent nothing: an OAuth client refreshing a token per
// attempt fenced all its member held at join_rate. Fails without (the
// second repeat 200).
func TestRefreshedTokensRepeatSpendsTheTenantsRate(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 64})
	e.cfg.TenantMemberRate, e.cfg.TenantMemberBurst = 0.001, 164 // a token every 1,000 s; the first join mints 64
	h := e.start(t)
	billing := createOAuthClient(t, h, "billing", []string{"g"})
	req := api.JoinRequest{SessionTimeoutMs: 300_000, Topics: []string{"orders"}}
	first := h.mustKeyedJoinIn(t, "g", oauthToken(t, e, h, billing), req, "k-1")
	ownsAll := func() { h.awaitOwned(t, "g", first.MemberID, 64) }
	ownsAll()
	if again := h.mustKeyedJoinIn(t, "g", oauthToken(t, e, h, billing), req, "k-1"); again.MemberID != first.MemberID {
		t.Fatalf("the repeat with a refreshed token answered member %s, want %s", again.MemberID, first.MemberID)
	}
	ownsAll()
	status, body := h.keyedJoin(t, "g", oauthToken(t, e, h, billing), req, "k-1")
	if status != http.StatusTooManyRequests || limitOf(body) != "coordinator.tenant_member_rate" {
		t.Fatalf("the second repeat, with a third token, fencing 64 partitions again: %d %.300s, want 429 naming coordinator.tenant_member_rate", status, body)
	}
}

// awaitOwned waits until member owns n partitions of group, every one
// settled (owned, not moving).
func (h *harness) awaitOwned(t *testing.T, group, member string, n int) {
	t.Helper()
	eventually(t, func() string {
		owned := 0
		for _, p := range h.describe(t, group).Partitions {
			if p.Owner == member && p.State == "owned" {
				owned++
			}
		}
		if owned != n {
			return fmt.Sprintf("member %s owns %d of %d partitions", member, owned, n)
		}
		return ""
	})
}
