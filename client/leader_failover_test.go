package client

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/capgate/capgate/internal/coordinators/coordinatorstest"
)

// attempts is a transport that counts the requests sent to each base
// URL, and may run a hook before each (another call's doing).
type attempts struct {
	mu     sync.Mutex
	byBase map[string]int
	before func(base string)
}

func (a *attempts) RoundTrip(req *http.Request) (*http.Response, error) {
	base := req.URL.Scheme + "://" + req.URL.Host
	a.mu.Lock()
	a.byBase[base]++
	a.mu.Unlock()
	if a.before != nil {
		a.before(base)
	}
	return http.DefaultTransport.RoundTrip(req)
}

// TestLeaderTransportTriesEachReplicaOnceInAFailover (redteam5 #6): the
// leader died, and the two other replicas still answer 421 naming it
// (they believe it until their lease runs out); a fourth now leads. One
// call asks each replica once — the dead leader, each standby, the new
// leader — and reaches the new leader; it neither dials the dead one
// again nor follows the standbys' hint back to it. Before, each 421
// sent the call back to the dead leader, and it gave up after n dials
// of it: "no coordinator replica reachable (tried D, D, D, D)", never
// having asked the new leader. With no leader at all, the call ends
// after one attempt per replica with a standby's 421 (retriable).
func TestLeaderTransportTriesEachReplicaOnceInAFailover(t *testing.T) {
	dead := coordinatorstest.Down(t)
	r1, _ := coordinatorstest.Standby(t, dead, true)
	r2, _ := coordinatorstest.Standby(t, dead, false) // the hint in the body only
	leader, _ := echo(t)
	for _, urls := range [][]string{
		{dead, r1.URL, r2.URL, leader.URL},
		{r1.URL, dead, r2.URL, leader.URL},
		{r1.URL, r2.URL, dead, leader.URL},
	} {
		sent := &attempts{byBase: map[string]int{}}
		hc, err := WithCoordinators(&http.Client{Transport: sent}, urls)
		if err != nil {
			t.Fatal(err)
		}
		status, got := post(t, hc, urls[0]+"/v1/groups/g/heartbeat", `{"n":1}`)
		if status != 200 || got != `/v1/groups/g/heartbeat {"n":1} Bearer member-token` {
			t.Errorf("list %q: %d %q; want the new leader's 200", urls, status, got)
		}
		for base, n := range sent.byBase {
			if n != 1 {
				t.Errorf("list %q: %s asked %d times in one call, want at most once (%v)", urls, base, n, sent.byBase)
			}
		}
		if sent.byBase[leader.URL] != 1 {
			t.Errorf("list %q: the leader asked %d times", urls, sent.byBase[leader.URL])
		}
	}
	if t.Failed() {
		return
	}

	urls := []string{dead, r1.URL, r2.URL}
	sent := &attempts{byBase: map[string]int{}}
	hc, err := WithCoordinators(&http.Client{Transport: sent}, urls)
	if err != nil {
		t.Fatal(err)
	}
	status, got := post(t, hc, dead+"/v1/groups/g/heartbeat", `{"n":1}`)
	if status != http.StatusMisdirectedRequest || !strings.Contains(got, "not_leader") {
		t.Errorf("no leader: %d %q; want a standby's 421 not_leader", status, got)
	}
	for _, u := range urls {
		if sent.byBase[u] != 1 {
			t.Errorf("no leader: %s asked %d times, want once each (%v)", u, sent.byBase[u], sent.byBase)
		}
	}
}

// TestLeaderTransportNamesEachReplicaOnce (redteam5 #6): while other
// calls keep moving the shared list back to the first replica (a 421
// from a standby naming it, before each of this call's attempts), a call
// with every replica down still dials each once, and its error names
// each URL once in "tried" and once with its reason. Before, it dialled
// the first again and again and said "tried D1, D2, D1".
func TestLeaderTransportNamesEachReplicaOnce(t *testing.T) {
	urls := []string{coordinatorstest.Down(t), coordinatorstest.Down(t), coordinatorstest.Down(t)}
	sent := &attempts{byBase: map[string]int{}}
	rt, err := NewLeaderTransport(urls, sent)
	if err != nil {
		t.Fatal(err)
	}
	lt := rt.(*leaderTransport)
	sent.before = func(string) { // another call's 421 naming the first replica
		lt.mu.Lock()
		lt.list.NotLeader(lt.list.Current(), urls[0])
		lt.mu.Unlock()
	}
	status, msg := post(t, &http.Client{Transport: rt}, urls[0]+"/v1/groups/g/heartbeat", `{"n":1}`)
	if status != 0 {
		t.Fatalf("status %d with no replica listening", status)
	}
	_, msg, _ = strings.Cut(msg, ": ") // past net/http's `Post "URL"`
	if want := "no coordinator replica reachable (tried " + strings.Join(urls, ", ") + ")"; !strings.HasPrefix(msg, want) {
		t.Errorf("error %q\ndoes not start %q", msg, want)
	}
	for _, u := range urls {
		if n := strings.Count(msg, u); n != 2 || sent.byBase[u] != 1 {
			t.Errorf("%s: named %d times (want 2: tried, and its reason), dialled %d times (want 1): %s", u, n, sent.byBase[u], msg)
		}
	}
}
