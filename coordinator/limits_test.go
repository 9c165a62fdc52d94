package coordinator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// errorDetails decodes an error body's details.
func errorDetails(t testing.TB, b []byte) map[string]any {
	t.Helper()
	var body api.ErrorBody
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatalf("not an error body: %s", b)
	}
	return body.Error.Details
}

// Every limit of a join, over HTTP: size limits answer 400 naming the
// setting, count limits 409 limit_exceeded with the setting and its value
// in the details.
func TestJoinLimitsOverHTTP(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 2})
	l := &e.cfg.Groups.Limits
	l.TopicsPerMember, l.TopicPatternBytes, l.TopicPatternCost = 5, 32, 100
	l.MembersPerGroup, l.GroupsPerCredential, l.Groups = 2, 2, 4
	e.cfg.JoinRate, e.cfg.JoinBurst = 1000, 1000
	h := e.start(t)
	a := h.clientCredential(t, []string{"*"}, []string{"*"})
	b := h.clientCredential(t, []string{"*"}, []string{"*"})
	join := func(cred, group string, req api.JoinRequest) (int, []byte) {
		status, body, _ := h.do(t, "POST", "/v1/groups/"+group+"/join", cred, req)
		return status, body
	}
	for name, req := range map[string]api.JoinRequest{
		"topics_per_member":   {Topics: []string{"a", "b", "c", "d", "e", "f"}},
		"topic_pattern_bytes": {TopicPattern: strings.Repeat("x", 33)},
		"topic_pattern_cost":  {TopicPattern: "(x{30}){30}"},
	} {
		status, body := join(a, "g", req)
		if status != 400 || errorCode(t, body) != api.CodeBadRequest || !strings.Contains(string(body), name) {
			t.Errorf("%s: %d %s, want 400 naming it", name, status, body)
		}
	}
	mustJoin := func(cred, group string) {
		t.Helper()
		if status, body := join(cred, group, api.JoinRequest{Topics: []string{"orders"}}); status != 200 {
			t.Fatalf("join %s: %d %s", group, status, body)
		}
	}
	limited := func(cred, group, limit string, max float64) {
		t.Helper()
		status, body := join(cred, group, api.JoinRequest{Topics: []string{"orders"}})
		d := errorDetails(t, body)
		if status != 409 || errorCode(t, body) != api.CodeLimitExceeded || d["limit"] != "coordinator.groups.limits."+limit || d["max"] != max {
			t.Fatalf("join %s past %s: %d %s", group, limit, status, body)
		}
	}
	mustJoin(a, "g")
	mustJoin(a, "g")
	limited(b, "g", "members_per_group", 2)
	mustJoin(a, "h")
	limited(a, "i", "groups_per_credential", 2)
	mustJoin(b, "i")
	mustJoin(b, "i2")
	limited(b, "j", "groups", 4)
}

// Joins are rate-limited per credential: past the burst 429 with
// Retry-After; another credential is not affected.
func TestJoinRateLimited(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	e.cfg.JoinRate, e.cfg.JoinBurst = 0.5, 3
	h := e.start(t)
	a := h.clientCredential(t, []string{"*"}, []string{"*"})
	b := h.clientCredential(t, []string{"*"}, []string{"*"})
	req := api.JoinRequest{Topics: []string{"orders"}}
	for i := range 3 {
		h.call(t, "POST", fmt.Sprintf("/v1/groups/g%d/join", i), a, req, 200, nil)
	}
	status, body, header := h.do(t, "POST", "/v1/groups/g9/join", a, req)
	if status != 429 || errorCode(t, body) != api.CodeRateLimited {
		t.Fatalf("fourth join: %d %s, want 429 rate_limited", status, body)
	}
	if header.Get("Retry-After") == "" {
		t.Fatal("429 without Retry-After")
	}
	// The operator of a fleet larger than the burst learns what to raise.
	var e429 struct {
		Error struct {
			Message string
			Limit   string
			Max     int
		}
	}
	if err := json.Unmarshal(body, &e429); err != nil || e429.Error.Limit != "coordinator.join_burst" || e429.Error.Max != 3 ||
		!strings.Contains(e429.Error.Message, "join_burst") {
		t.Fatalf("429 does not name the settings: %s", body)
	}
	h.call(t, "POST", "/v1/groups/g9/join", b, req, 200, nil)
}

// A fleet of one service — one client credential — starting at once
// joins without a refusal at the defaults: at join_rate 5/s and
// join_burst 20, the 21st consumer of a 200-pod deployment was 429 and
// the last joined ~36 s later, the group rebalancing all the while
// (DESIGN §12's join storm is 1,000 members).
func TestAFleetOfOneServiceJoinsAtOnce(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 8})
	if d := coordinator.DefaultConfig(); e.cfg.JoinRate != d.JoinRate || e.cfg.JoinBurst != d.JoinBurst {
		t.Fatalf("the harness changed the join defaults: %v/%d", e.cfg.JoinRate, e.cfg.JoinBurst)
	}
	h := e.start(t)
	svc := h.clientCredential(t, []string{"fleet"}, []string{"orders"})
	const pods = 200
	var wg sync.WaitGroup
	refused := make(chan string, pods)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range pods / 8 {
				// Sessions of 5 minutes: the members never heartbeat, and
				// 200 joins under -race on a loaded machine take longer
				// than the default 10 s session (1.6–2.4 s quiet; with 1 s
				// sessions a quiet -race run kept 121–191 of 200).
				status, body, _, err := h.try("POST", "/v1/groups/fleet/join", svc, api.JoinRequest{Topics: []string{"orders"}, SessionTimeoutMs: 300_000})
				if err != nil || status != 200 {
					refused <- fmt.Sprintf("%d %s %v", status, body, err)
				}
			}
		}()
	}
	wg.Wait()
	close(refused)
	n := 0
	for r := range refused {
		if n++; n == 1 {
			t.Errorf("a join of the fleet refused: %s", r)
		}
	}
	if n > 0 {
		t.Fatalf("%d of %d joins refused", n, pods)
	}
	if d := h.describe(t, "fleet"); len(d.Members) != pods {
		t.Fatalf("%d members, want %d", len(d.Members), pods)
	}
}

// A commit beyond the partition's log end, at int64 max, or with metadata
// past the limit is refused; at the log end it is accepted, also once the
// log grew after the coordinator last looked.
func TestCommitBoundsOverHTTP(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	h := e.start(t)
	produce := func(n int) {
		for range n {
			if _, err := e.broker.Produce(context.Background(), "orders", 0, []*kgo.Record{{Value: []byte("v")}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(5)
	m := h.join(t, "g", h.clientCredential(t, []string{"g"}, []string{"orders"}), api.JoinRequest{Topics: []string{"orders"}})
	g, _ := m.grant("orders", 0)
	commit := func(offset int64, metadata string) (int, []byte) {
		status, body, _ := h.do(t, "POST", "/v1/groups/g/commit", m.token, api.CommitRequest{
			Offsets: []api.CommitOffset{{Topic: "orders", Partition: 0, Offset: offset, Metadata: metadata, Capability: g.Capability}}})
		return status, body
	}
	for _, offset := range []int64{6, 1000, math.MaxInt64} {
		status, body := commit(offset, "")
		if status != 416 || errorCode(t, body) != api.CodeOffsetOutOfRange || errorDetails(t, body)["latest"] != 5.0 {
			t.Errorf("commit at %d: %d %s, want 416 with latest 5", offset, status, body)
		}
	}
	if status, body := commit(3, strings.Repeat("m", 900<<10)); status != 400 || !strings.Contains(string(body), "commit_metadata_bytes") {
		t.Errorf("commit with 900 KB of metadata: %d %.200s", status, body)
	}
	if status, body := commit(5, "ok"); status != 200 {
		t.Fatalf("commit at the log end: %d %s", status, body)
	}
	produce(2)
	if status, body := commit(7, ""); status != http.StatusOK {
		t.Fatalf("commit at the grown log end: %d %s", status, body)
	}
	var d coordinator.GroupDescription
	h.call(t, "GET", "/v1/admin/groups/g", e.adminToken, nil, 200, &d)
	if d.Partitions[0].Committed == nil || *d.Partitions[0].Committed != 7 {
		t.Fatalf("committed %+v", d.Partitions[0].Committed)
	}
}

// A describe is one bounded page: at most describe_page_max members and
// partitions, members within describe_bytes_max; the cursors walk the
// whole group once.
func TestDescribeIsPaged(t *testing.T) {
	long := make([]string, 1000)
	topics := map[string]int32{"t": 25}
	for i := range long {
		long[i] = fmt.Sprintf("%0200d", i)
		topics[long[i]] = 1 // a join names topics Kafka has (404 otherwise)
	}
	e := newEnv(t, topics)
	e.cfg.DescribePageMax, e.cfg.DescribeBytesMax = 10, 64<<10
	e.cfg.JoinRate, e.cfg.JoinBurst = 1000, 1000
	h := e.start(t)
	cred := h.clientCredential(t, []string{"*"}, []string{"*"})
	// The members live 5 minutes: a default 10 s session can end
	// before the pages are read — a 1,000-topic join under -race on a
	// loaded machine takes 5–9 s (at load 21), and a race run at load 28
	// found group big empty: 200, 0 members.
	joined := map[string]bool{}
	for range 23 {
		joined[h.join(t, "g", cred, api.JoinRequest{SessionTimeoutMs: 300_000, Topics: []string{"t"}}).id] = true
	}
	members, partitions := map[string]bool{}, map[int32]bool{}
	membersAfter, partitionsAfter, pages := "", "", 0
	for {
		path := "/v1/admin/groups/g?"
		if membersAfter != "" {
			path += "members_after=" + membersAfter + "&"
		}
		if partitionsAfter != "" {
			path += "partitions_after=" + partitionsAfter
		}
		var d coordinator.GroupDescription
		h.call(t, "GET", path, e.adminToken, nil, 200, &d)
		if len(d.Members) > 10 || len(d.Partitions) > 10 {
			t.Fatalf("page of %d members and %d partitions, limit 10", len(d.Members), len(d.Partitions))
		}
		for _, m := range d.Members {
			if members[m.ID] {
				t.Fatalf("member %s on two pages", m.ID)
			}
			members[m.ID] = true
		}
		for _, p := range d.Partitions {
			partitions[p.Partition] = true
		}
		pages++
		if d.NextMembersAfter == "" && d.NextPartitionsAfter == "" {
			break
		}
		membersAfter, partitionsAfter = d.NextMembersAfter, d.NextPartitionsAfter
	}
	if len(members) != len(joined) || len(partitions) != 25 || pages != 3 {
		t.Fatalf("walked %d of %d members, %d of 25 partitions in %d pages", len(members), len(joined), len(partitions), pages)
	}
	for range 3 {
		h.join(t, "big", cred, api.JoinRequest{SessionTimeoutMs: 300_000, Topics: long})
	}
	status, body, _ := h.do(t, "GET", "/v1/admin/groups/big", e.adminToken, nil)
	var d coordinator.GroupDescription
	if status != 200 || json.Unmarshal(body, &d) != nil || len(d.Members) != 1 || d.NextMembersAfter == "" {
		t.Fatalf("describe of members of 200 kB each: %d, %d members, next %q", status, len(d.Members), d.NextMembersAfter)
	}
	t.Logf("a page of one 1,000-topic member: %d bytes", len(body))
	var names coordinator.GroupsResponse
	h.call(t, "GET", "/v1/admin/groups?limit=1", e.adminToken, nil, 200, &names)
	if len(names.Groups) != 1 || names.NextAfter != names.Groups[0] {
		t.Fatalf("groups page: %+v", names)
	}
	h.expectError(t, "GET", "/v1/admin/groups/g?limit=11", e.adminToken, nil, 400, api.CodeBadRequest)
	h.expectError(t, "GET", "/v1/admin/groups/g?partitions_after=nope", e.adminToken, nil, 400, api.CodeBadRequest)
}

// TestOAuthClientJoinsShareOneBudget: the credentials one OAuth client
// obtains share the client's join_rate budget. Each had its own, so a
// client holding oauth.live_tokens_max (1,000) credentials joined 1,000
// times join_rate — every join a persisted Ready of the one event loop.
// Another client's budget is its own.
func TestOAuthClientJoinsShareOneBudget(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	e.cfg.JoinRate, e.cfg.JoinBurst = 0.5, 3
	h := e.start(t)
	token := func(o coordinator.OAuthClientCreated) string { return h.oauthToken(t, o) }
	a := createOAuthClient(t, h, "a", []string{"*"})
	b := createOAuthClient(t, h, "b", []string{"*"})
	req := api.JoinRequest{Topics: []string{"orders"}}
	for i := range 3 {
		h.call(t, "POST", fmt.Sprintf("/v1/groups/g%d/join", i), token(a), req, 200, nil)
	}
	h.expectError(t, "POST", "/v1/groups/g9/join", token(a), req, 429, api.CodeRateLimited)
	h.call(t, "POST", "/v1/groups/g9/join", token(b), req, 200, nil)
}
