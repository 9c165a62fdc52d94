package group_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/group"
)

// keyedJoin joins (or repeats a join) with cred and key; it fails the
// test on a rejection.
func (w *world) keyedJoin(cred group.Credential, key string) group.JoinReply {
	w.t.Helper()
	r, ok := w.joinAs(cred, group.Join{Group: "g", ClientID: "c", JoinKey: key}).(group.JoinReply)
	if !ok {
		w.t.Fatalf("join with key %q as %s: %#v", key, cred.ID, w.replies[w.ref])
	}
	return r
}

// A join given up on a leader that was only slow was written anyway: its
// repeat (the same key, the next attempt of that join) is answered the
// member the first made — fenced, as any rejoin — instead of a second
// member nobody heartbeats, holding half the partitions until its
// session ran out. Another credential's same key names another member,
// and a key survives a restart (a takeover reads the member from the
// log and maps the repeat alike).
func TestKeyedJoinRepeatFindsItsMember(t *testing.T) {
	w := newWorld(t)
	w.topics(map[string]int32{"t": 4})
	w.pollUntilParked("gw1")
	first := w.keyedJoin(credA, "join-1")
	if !first.Created || len(first.Grants) != 4 {
		t.Fatalf("first attempt: %+v", first)
	}
	epochs := w.epochs("g")
	again := w.keyedJoin(credA, "join-1")
	if again.MemberID != first.MemberID || again.Created {
		t.Fatalf("repeat: member %q (created %t), want %q again", again.MemberID, again.Created, first.MemberID)
	}
	if len(again.Grants) != 0 {
		t.Fatalf("repeat answered grants %+v: a rejoin fences first", again.Grants)
	}
	for p, e := range w.epochs("g") {
		if e <= epochs[p] {
			t.Fatalf("%v: epoch %d after the repeat, %d before: not fenced", p, e, epochs[p])
		}
	}
	if n := len(w.describe("g").Members); n != 1 {
		t.Fatalf("%d members after the repeat, want 1: %+v", n, w.describe("g").Members)
	}

	other := w.keyedJoin(credB, "join-1")
	if other.MemberID == first.MemberID || !other.Created {
		t.Fatalf("another credential's same key: member %q (created %t), first %q", other.MemberID, other.Created, first.MemberID)
	}
	next := w.keyedJoin(credA, "join-2")
	if next.MemberID == first.MemberID || !next.Created {
		t.Fatalf("the next join's key: member %q (created %t), first %q", next.MemberID, next.Created, first.MemberID)
	}

	w.restart(time.Second)
	after := w.keyedJoin(credA, "join-1")
	if after.MemberID != first.MemberID || after.Created {
		t.Fatalf("repeat after a restart: member %q (created %t), want %q", after.MemberID, after.Created, first.MemberID)
	}
	if n := len(w.describe("g").Members); n != 3 {
		t.Fatalf("%d members, want 3: %+v", n, w.describe("g").Members)
	}
}

// A key expires with its member: once the member's session ran out
// unheard, a repeat makes a new member (it finds nothing to rejoin). A
// key whose member an administrator revoked makes a member of another
// id while the revocation runs (the gateways refuse that id's
// capabilities until it lapses).
func TestJoinKeyExpiresWithItsMember(t *testing.T) {
	w := newWorld(t)
	w.topics(map[string]int32{"t": 2})
	w.pollUntilParked("gw1")
	first := w.keyedJoin(credA, "k")
	w.advance(w.cfg.SessionTimeout + time.Second)
	if n := len(w.describe("g").Members); n != 0 {
		t.Fatalf("%d members after the session ran out, want 0", n)
	}
	late := w.keyedJoin(credA, "k")
	if !late.Created {
		t.Fatalf("repeat after the member expired: %+v, want a new member", late)
	}
	if late.MemberID != first.MemberID {
		t.Fatalf("repeat after expiry: id %q, want the key's id %q", late.MemberID, first.MemberID)
	}

	ref := w.nextRef()
	w.step(group.RevokeMember{Ref: ref, Group: "g", MemberID: late.MemberID})
	mustReply[group.RevokeMemberReply](t, w, ref)
	revoked := w.keyedJoin(credA, "k")
	if !revoked.Created || revoked.MemberID == late.MemberID {
		t.Fatalf("repeat after the member was revoked: %+v, want a new member of another id than %q", revoked, late.MemberID)
	}
	if rej, ok := w.joinAs(credA, group.Join{Group: "g", MemberID: late.MemberID}).(group.Rejected); !ok || rej.Code != api.CodeUnknownMember {
		t.Fatalf("rejoin of the revoked member: %#v", w.replies[w.ref])
	}
}

// A join's attempts carry one key, but an OAuth client's token may be
// refreshed between two of them (each /oauth/token credential is its own
// jti): the repeat with the new token is still answered the member the
// first attempt made — the key is the tenant's (the OAuth client's), not
// the token's — fenced, and rebound to the new token as a renewal would
// be (denying the old token no longer ends it, denying the new one
// does). Another OAuth client's same key never finds it, and neither
// does a refreshed token once the member's token was denied (the deny
// ended the member; the repeat makes a member of another id while the
// member's revocation runs). Across a restart too. Before, the repeat
// made a second member, an orphan holding half the partitions until its
// session ran out.
func TestKeyedJoinRepeatWithARefreshedToken(t *testing.T) {
	w := newWorld(t)
	w.topics(map[string]int32{"t": 4})
	w.pollUntilParked("gw1")
	token := func(client string, n int) group.Credential {
		return group.Credential{ID: fmt.Sprintf("jti-%s-%d", client, n), Issuer: "capgate", Subject: "oauth:" + client}
	}
	join := func(cred group.Credential, key string) group.JoinReply {
		t.Helper()
		r, ok := w.joinAs(cred, group.Join{Group: "g", ClientID: "c", JoinKey: key, Tenant: cred.Subject}).(group.JoinReply)
		if !ok {
			t.Fatalf("join with key %q as %s: %#v", key, cred.ID, w.replies[w.ref])
		}
		return r
	}
	members := func() int { return len(w.describe("g").Members) }
	first := join(token("billing", 1), "k")
	epochs := w.epochs("g")
	again := join(token("billing", 2), "k")
	if again.MemberID != first.MemberID || again.Created {
		t.Fatalf("repeat with a refreshed token: member %q (created %t), want %q again", again.MemberID, again.Created, first.MemberID)
	}
	for p, e := range w.epochs("g") {
		if e <= epochs[p] {
			t.Fatalf("%v: epoch %d after the repeat, %d before: not fenced", p, e, epochs[p])
		}
	}
	if n := members(); n != 1 {
		t.Fatalf("%d members after the repeat, want 1", n)
	}
	deny := func(cred group.Credential) {
		t.Helper()
		ref := w.nextRef()
		w.step(group.DenyJTIs{Ref: ref, Denials: []group.Denial{{JTI: cred.ID, Expires: w.now.Add(time.Hour)}}})
		mustReply[group.Done](t, w, ref)
	}
	deny(token("billing", 1))
	if n := members(); n != 1 {
		t.Fatalf("denying the first token ended the member rebound to the second: %d members", n)
	}

	other := join(token("other", 1), "k")
	if other.MemberID == first.MemberID || !other.Created {
		t.Fatalf("another OAuth client's same key: member %q (created %t), first %q", other.MemberID, other.Created, first.MemberID)
	}

	w.restart(time.Second)
	after := join(token("billing", 3), "k")
	if after.MemberID != first.MemberID || after.Created {
		t.Fatalf("repeat with a third token after a restart: member %q (created %t), want %q", after.MemberID, after.Created, first.MemberID)
	}
	deny(token("billing", 2)) // no longer the member's: it lives on
	if n := members(); n != 2 {
		t.Fatalf("%d members after denying a token the member left, want 2", n)
	}
	deny(token("billing", 3))
	if n := members(); n != 1 {
		t.Fatalf("denying the member's token left %d members, want 1 (other's)", n)
	}
	fresh := join(token("billing", 4), "k")
	if !fresh.Created || fresh.MemberID == first.MemberID {
		t.Fatalf("repeat after the member's token was denied: %+v, want a new member of another id than %q", fresh, first.MemberID)
	}
}
