package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// TestAdminListsFollowEveryPage: `admin groups` printed the first page
// of describe_page_max names and "(more after NAME)", a cursor no flag
// took (newuser5); it and `admin topics` read every page (?after= at
// each next_after) and print one list, as rpk's list commands; `admin
// groups` with each group's summary, read with its page's names.
func TestAdminListsFollowEveryPage(t *testing.T) {
	pages := map[string]string{
		"/v1/admin/groups?summaries=true": `{"groups":["a","b"],"next_after":"b","summaries":[` +
			`{"group":"a","config":{},"members":2,"partitions":3,"owned":3,"lag":7},{"group":"b","config":{},"members":1,"partitions":2,"revoking":1}]}`,
		"/v1/admin/groups?summaries=true&after=b": `{"groups":["c"],"summaries":[{"group":"c","config":{},"members":0,"partitions":1,"unowned":1}]}`,
		"/v1/admin/topics":                        `{"topics":[{"topic":"t1","partitions":3}],"next_after":"t1"}`,
		"/v1/admin/topics?after=t1":               `{"topics":[{"topic":"t2","partitions":1}]}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		page, ok := pages[r.URL.RequestURI()]
		if !ok {
			http.Error(w, `{"error":{"code":"not_found","message":"no page"}}`, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(page))
	}))
	defer srv.Close()
	for args, want := range map[string]string{
		"groups -o table": "GROUP  STATE        MEMBERS  PARTITIONS  LAG\na      Stable       2        3           7\nb      Rebalancing  1        2           -\nc      Empty        0        1           -\n",
		"topics -o table": "TOPIC  PARTITIONS\nt1     3\nt2     1\n",
	} {
		out, err := run(t, append(append([]string{"admin"}, strings.Fields(args)...), "--coordinator", srv.URL, "--token", "x")...)
		if err != nil || out != want {
			t.Errorf("admin %s: %v\n%q, want\n%q", args, err, out, want)
		}
	}
	out, err := run(t, "admin", "groups", "-o", "json", "--coordinator", srv.URL, "--token", "x")
	var list groupList
	if err != nil || json.Unmarshal([]byte(out), &list) != nil || strings.Join(list.Groups, ",") != "a,b,c" || len(list.Summaries) != 3 {
		t.Errorf("admin groups -o json: %v\n%s\nwant the 3 names and 3 summaries", err, out)
	}
}

// TestGroupDescribeSaysWhichTopicsArePatterns: a member subscribed by
// pattern showed its pattern bare in TOPICS ("^de"), read as a topic
// name beside a listed member's "demo" (newuser5); it says "pattern".
func TestGroupDescribeSaysWhichTopicsArePatterns(t *testing.T) {
	var out strings.Builder
	raw := `{"group":"g","config":{},"members":[{"id":"m1","topics":["demo"]},{"id":"m2","topic_pattern":"^de"}],"partitions":[]}`
	if err := printGroupDescription(&out, []byte(raw)); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^m2\s.*\spattern \^de\s`).MatchString(out.String()) || !regexp.MustCompile(`(?m)^m1\s.*\sdemo\s`).MatchString(out.String()) {
		t.Fatalf("members table:\n%s", out.String())
	}
}

// TestAdminGroupsOfAnOlderCoordinator: a coordinator from before
// ?summaries= refuses the parameter (400): `admin groups` lists every
// page of names then, each group's columns "-", rather than failing.
func TestAdminGroupsOfAnOlderCoordinator(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.RequestURI() {
		case "/v1/admin/groups":
			w.Write([]byte(`{"groups":["a"],"next_after":"a"}`))
		case "/v1/admin/groups?after=a":
			w.Write([]byte(`{"groups":["b"]}`))
		default:
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"error":{"code":"bad_request","message":"unknown query parameter \"summaries\""}}`))
		}
	}))
	defer srv.Close()
	out, err := run(t, "admin", "groups", "-o", "table", "--coordinator", srv.URL, "--token", "x")
	if want := "GROUP  STATE  MEMBERS  PARTITIONS  LAG\na      -      -        -           -\nb      -      -        -           -\n"; err != nil || out != want {
		t.Errorf("admin groups of an older coordinator: %v\n%q, want\n%q", err, out, want)
	}
}
