package kafkaproto

import (
	"fmt"
	"testing"
)

// TestMemberKeysAreBounded: each re-authentication into another
// credential of the same name adds a client key a member is reachable by
// (groups.carryOver); a member keeps at most maxMemberKeys, the oldest
// going first, and leaving takes it out of every one.
func TestMemberKeysAreBounded(t *testing.T) {
	g := &groups{byID: map[memberRef]*member{}, byKey: map[clientKey][]*member{}, keys: map[*member][]clientKey{}}
	key := func(i int) clientKey {
		return clientKey{issuer: "capgate", tenant: fmt.Sprint("jti-", i), clientID: "c", ip: "10.0.0.1"}
	}
	m := &member{group: "g", id: "m", key: key(0)}
	g.byID[memberRef{"g", "m"}] = m
	g.byKey[m.key] = []*member{m}
	g.keys[m] = []clientKey{m.key}
	const renewals = maxMemberKeys + 3
	for i := 1; i <= renewals; i++ {
		g.reach(m, key(i))
		g.reach(m, key(i)) // again: once
	}
	if n := len(g.keys[m]); n != maxMemberKeys {
		t.Fatalf("%d keys after %d renewals, want maxMemberKeys %d", n, renewals, maxMemberKeys)
	}
	for i := 0; i <= renewals; i++ {
		want := i > renewals-maxMemberKeys
		if got := g.own("g", "m", key(i)) == m; got != want || (len(g.ofKey(key(i))) == 1) != want {
			t.Errorf("key %d reaches the member: own %v, ofKey %d; want %v", i, got, len(g.ofKey(key(i))), want)
		}
		if g.taken("g", "m", key(i)) == want {
			t.Errorf("key %d: taken %v, want %v", i, !want, !want)
		}
	}
	g.remove(m)
	if len(g.byKey) != 0 || len(g.keys) != 0 || len(g.byID) != 0 {
		t.Fatalf("after remove: byKey %d, keys %d, byID %d; want none", len(g.byKey), len(g.keys), len(g.byID))
	}
	g.reach(m, key(99)) // a carry-over racing the member's end adds nothing
	if len(g.byKey) != 0 {
		t.Fatal("a removed member was made reachable again")
	}
}
