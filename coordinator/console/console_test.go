package console

import (
	"encoding/json"
	"slices"
	"testing"
	"time"
)

// TestSessionsBoundedAndExpire: the table never holds more than max
// sessions (the oldest goes first), an expired session is refused, and an
// ended one is gone.
func TestSessionsBoundedAndExpire(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s := newSessions(2, time.Hour, func() time.Time { return now })
	a, _ := s.create("admin", time.Time{}, nil)
	now = now.Add(time.Minute)
	b, _ := s.create("admin", time.Time{}, nil)
	now = now.Add(time.Minute)
	c, _ := s.create("admin", time.Time{}, nil)
	if s.get(a) != nil || s.get(b) == nil || s.get(c) == nil || s.len() != 2 {
		t.Fatalf("after a third login with max 2: a %v b %v c %v, %d sessions", s.get(a) != nil, s.get(b) != nil, s.get(c) != nil, s.len())
	}
	now = now.Add(time.Hour - time.Minute) // b is exactly an hour old
	if s.get(b) != nil || s.get(c) == nil {
		t.Fatal("b must have expired at its ttl, c not yet")
	}
	s.end(c)
	if s.get(c) != nil || s.get("") != nil || s.get("not-a-session") != nil {
		t.Fatal("ended, empty or unknown ids must not resolve")
	}
	d, sess := s.create("admin", time.Time{}, nil)
	if d == c || len(d) != 43 || len(sess.csrf) != 43 || sess.csrf == d {
		t.Fatalf("ids must be fresh 256-bit values: %q csrf %q", d, sess.csrf)
	}
}

// TestOnlyListedActions: the console reaches exactly the seven admin actions.
func TestOnlyListedActions(t *testing.T) {
	ok := [][]string{
		{"POST", "groups/g/partitions/t/3/revoke"}, {"POST", "groups/g/partitions/t/3/lease"},
		{"POST", "groups/g/members/m-1/revoke"}, {"POST", "capabilities/abc/revoke"},
		{"PUT", "qos"}, {"PUT", "groups/g/config"}, {"PUT", "groups/g/partitions/t/3/offset"},
	}
	refused := [][]string{
		{"POST", "keys/rotate"}, {"POST", "clients"}, {"POST", "capabilities"},
		{"POST", "groups/g/partitions/t/3/offset"}, {"PUT", "groups/g/partitions/t/3/offset/x"}, {"GET", "groups"}, {"POST", "qos"},
		{"POST", "groups/g/partitions/t/3/revoke/x"}, {"POST", "groups//members/m/revoke"}, {"PUT", "groups/g/config/x"},
	}
	for _, c := range ok {
		if !allowedAction(c[0], splitTest(c[1])) {
			t.Errorf("%s %s refused", c[0], c[1])
		}
	}
	for _, c := range refused {
		if allowedAction(c[0], splitTest(c[1])) {
			t.Errorf("%s %s allowed", c[0], c[1])
		}
	}
}

func splitTest(p string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(p); i++ {
		if i == len(p) || p[i] == '/' {
			out = append(out, p[start:i])
			start = i + 1
		}
	}
	return out
}

// TestAuditTable: the audit view shows whatever list of entries the audit
// route returns, known fields first, bounded.
func TestAuditTable(t *testing.T) {
	doc := map[string]any{
		"next": "x",
		"entries": []any{
			map[string]any{"result": "ok", "at": "2030-01-01T00:00:00Z", "who": "admin", "action": "revoke", "target": map[string]any{"group": "g"}, "zeta": 1.0},
			map[string]any{"at": "2030-01-01T00:00:01Z", "who": "console", "action": "qos", "extra": nil},
			"not an entry",
		},
	}
	tab := tabulate(entries(doc))
	wantCols := []string{"at", "who", "action", "target", "result", "extra", "zeta"}
	if !slices.Equal(tab.Columns, wantCols) || len(tab.Rows) != 2 {
		t.Fatalf("columns %v rows %d, want %v and 2", tab.Columns, len(tab.Rows), wantCols)
	}
	if tab.Rows[0][3] != `{"group":"g"}` || tab.Rows[0][6] != "1" || tab.Rows[1][4] != "" {
		t.Fatalf("rows %q", tab.Rows)
	}
	if len(tabulate(entries([]any{})).Rows) != 0 || entries("text") != nil {
		t.Fatal("an empty or shapeless log is an empty table")
	}
	// An audit seq (the unix microsecond of a run's first action, plus
	// one per entry) is shown in plain digits, not 1.7999e+15.
	var seqDoc any
	if err := json.Unmarshal([]byte(`{"entries":[{"seq":1799123456789012,"at":"x"}]}`), &seqDoc); err != nil {
		t.Fatal(err)
	}
	if row := tabulate(entries(seqDoc)).Rows[0]; !slices.Contains(row, "1799123456789012") {
		t.Fatalf("seq shown as %q", row)
	}
}
