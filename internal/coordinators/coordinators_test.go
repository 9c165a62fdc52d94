package coordinators

import (
	"reflect"
	"testing"
)

func mustNew(t *testing.T, urls ...string) *List {
	t.Helper()
	l, err := New(urls)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestNewChecks(t *testing.T) {
	for _, bad := range [][]string{nil, {"ftp://a"}, {"http://"}, {"http://a?x=1"}, {"http://u:p@a"}, {"http://a", "HTTP://A/"}} {
		if _, err := New(bad); err == nil {
			t.Errorf("New(%q) accepted", bad)
		}
	}
	l := mustNew(t, "http://A:7070/", "https://b:7070")
	if got := l.URLs(); !reflect.DeepEqual(got, []string{"http://a:7070", "https://b:7070"}) {
		t.Fatalf("URLs %q", got)
	}
	if got := Split(" http://a, ,http://b ,"); !reflect.DeepEqual(got, []string{"http://a", "http://b"}) {
		t.Fatalf("Split %q", got)
	}
}

// A listed hint is followed at once and cached; an unlisted one is not.
func TestNotLeaderFollowsListedHint(t *testing.T) {
	l := mustNew(t, "http://a", "http://b", "http://c")
	next, backoff := l.NotLeader("http://a", "http://C/")
	if next != "http://c" || backoff || l.Current() != "http://c" {
		t.Fatalf("after a hint to c: next %s backoff %t current %s", next, backoff, l.Current())
	}
	l.Succeeded("http://c")
	if l.Current() != "http://c" {
		t.Fatalf("the leader is not cached: current %s", l.Current())
	}
	next, _ = l.NotLeader("http://c", "https://evil.example")
	if next != "http://a" {
		t.Fatalf("an unlisted hint moved to %s, want the next listed URL", next)
	}
	next, _ = l.NotLeader("http://a", "http://a")
	if next != "http://b" {
		t.Fatalf("a replica naming itself: next %s, want b", next)
	}
}

// Misses back off once per round of the list; a success ends the streak.
func TestBackoffOncePerRound(t *testing.T) {
	l := mustNew(t, "http://a", "http://b")
	var got []bool
	for range 4 {
		_, backoff := l.Failed(l.Current())
		got = append(got, backoff)
	}
	if !reflect.DeepEqual(got, []bool{false, true, false, true}) {
		t.Fatalf("backoffs %v", got)
	}
	l.Succeeded("http://b")
	if _, backoff := l.NotLeader("http://b", ""); backoff {
		t.Fatal("backoff right after a success")
	}
	// Two standbys naming each other cannot loop without a pause.
	l = mustNew(t, "http://a", "http://b")
	backoffs := 0
	for range 10 {
		cur := l.Current()
		other := map[string]string{"http://a": "http://b", "http://b": "http://a"}[cur]
		if _, b := l.NotLeader(cur, other); b {
			backoffs++
		}
	}
	if backoffs != 5 {
		t.Fatalf("%d backoffs in 10 ping-pong hints, want 5", backoffs)
	}
}

// A failure reported for a URL that is no longer current moves nothing.
func TestStaleFailure(t *testing.T) {
	l := mustNew(t, "http://a", "http://b", "http://c")
	l.Failed("http://a") // now b
	if next, _ := l.Failed("http://a"); next != "http://b" {
		t.Fatalf("stale failure moved to %s", next)
	}
	if next, _ := l.NotLeader("http://a", "http://c"); next != "http://b" {
		t.Fatalf("stale hint moved to %s", next)
	}
}

func TestBase(t *testing.T) {
	l := mustNew(t, "http://a:7070", "http://b:7070")
	for raw, want := range map[string][2]string{
		"http://b:7070/v1/groups/g/join": {"http://b:7070", "/v1/groups/g/join"},
		"http://a:7070?x":                {"http://a:7070", "?x"},
		"HTTP://A:7070/v1/X":             {"http://a:7070", "/v1/X"},
		"http://a:70701/v1":              {"", ""},
		"http://c:7070/v1":               {"", ""},
	} {
		base, rest, ok := l.Base(raw)
		if ok != (want[0] != "") || base != want[0] || rest != want[1] {
			t.Errorf("Base(%s) = %s %s %t, want %v", raw, base, rest, ok, want)
		}
	}
}

// A call sends to each URL at most once: it skips one it found
// unreachable even when another call moved the list back to it, follows
// a listed hint it has not tried (even when the shared list is
// elsewhere), and not one it has; then it ends.
func TestCallTriesEachURLOnce(t *testing.T) {
	l := mustNew(t, "http://d", "http://r1", "http://r2", "http://l")
	c := l.Call()
	var got []string
	for {
		u, ok := c.Next()
		if !ok {
			break
		}
		got = append(got, u)
		switch u {
		case "http://d":
			l.Failed(u)
		case "http://r1", "http://r2":
			l.NotLeader("http://r1", "http://d") // another call's 421 moves the list back to d
			c.NotLeader(u, "http://d")
		}
	}
	if want := []string{"http://d", "http://r1", "http://r2", "http://l"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("a call sent to %q, want each URL once: %q", got, want)
	}

	l = mustNew(t, "http://a", "http://b", "http://c")
	l.Failed("http://a") // the shared list is at b
	c = l.Call()
	if u, _ := c.Next(); u != "http://b" {
		t.Fatalf("first %s, want the current b", u)
	}
	l.Failed("http://b") // another call: now c
	c.NotLeader("http://b", "http://a")
	if u, _ := c.Next(); u != "http://a" {
		t.Fatalf("after b named a: %s, want a (an untried listed hint)", u)
	}
	c.NotLeader("http://a", "http://b") // b was tried: not followed
	if u, ok := c.Next(); u != "http://c" || !ok {
		t.Fatalf("after a named b: %s %t, want c", u, ok)
	}
	if u, ok := c.Next(); ok {
		t.Fatalf("a fourth attempt at %s in a list of three", u)
	}
}
