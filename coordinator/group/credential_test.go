package group_test

import (
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/assign"
	"github.com/capgate/capgate/coordinator/group"
)

var (
	credA = group.Credential{ID: "jti-a", Issuer: "capgate", Subject: "svc-a"}
	credB = group.Credential{ID: "jti-b", Issuer: "capgate", Subject: "svc-b"}
)

// joinAs joins a member opened by cred and returns the reply or rejection.
func (w *world) joinAs(cred group.Credential, j group.Join) group.Message {
	w.t.Helper()
	j.Ref, j.Credential = w.nextRef(), cred
	if j.Topics == nil && j.TopicPattern == "" {
		j.Topics = []string{"t"}
	}
	w.step(j)
	return w.replies[j.Ref]
}

// A member id opens nothing for another credential; the rightful one (or
// the member's own token) rejoins, and every rejoin fences: no grant in
// the reply, the partitions come back in news under higher epochs.
func TestRejoinIsBoundToTheCredential(t *testing.T) {
	w := newWorld(t)
	w.topics(map[string]int32{"t": 3})
	w.pollUntilParked("gw1")
	r := w.joinAs(credA, group.Join{Group: "g"}).(group.JoinReply)
	if len(r.Grants) != 3 || w.describe("g").Members[0].Credential != credA {
		t.Fatalf("join: %+v, described as %+v", r, w.describe("g").Members)
	}
	id := r.MemberID
	if rej, ok := w.joinAs(credB, group.Join{Group: "g", MemberID: id}).(group.Rejected); !ok || rej.Code != api.CodeUnknownMember {
		t.Fatalf("rejoin by another credential: %#v", w.replies[w.ref])
	}
	if rej, ok := w.joinAs(group.Credential{}, group.Join{Group: "g", MemberID: id, ByMemberToken: true, Topics: []string{"t", "u"}}).(group.Rejected); !ok || rej.Code != api.CodeForbidden {
		t.Fatalf("member-token rejoin changing the subscription: %#v", w.replies[w.ref])
	}
	for _, j := range []struct {
		cred  group.Credential
		token bool
	}{{credA, false}, {group.Credential{}, true}} {
		epochs := w.epochs("g")
		from := len(w.sent)
		again, ok := w.joinAs(j.cred, group.Join{Group: "g", MemberID: id, ByMemberToken: j.token}).(group.JoinReply)
		if !ok || len(again.Grants) != 0 {
			t.Fatalf("rejoin (member token %t): %#v", j.token, w.replies[w.ref])
		}
		w.heartbeat(id) // answered at once: the revoke of the old epochs
		w.settleGateways()
		w.heartbeat(id)
		granted := grantsFor(w.sent[from:], id)
		if len(granted) != 3 {
			t.Fatalf("after the rejoin (member token %t) granted %v", j.token, granted)
		}
		for _, g := range granted {
			if old := epochs[assign.Partition{Topic: g.Topic, Partition: g.Partition}]; g.Epoch <= old {
				t.Fatalf("grant %+v not above the old epoch %d", g, old)
			}
		}
	}
	if w.describe("g").Members[0].Credential != credA {
		t.Fatal("a member-token rejoin changed the binding")
	}
}

// Static membership belongs to the credential: another credential naming
// the instance id gets 409 and the member keeps its partitions.
func TestStaticInstanceOfAnotherCredential(t *testing.T) {
	w := newWorld(t)
	w.topics(map[string]int32{"t": 2})
	r := w.joinAs(credA, group.Join{Group: "g", InstanceID: "svc-1"}).(group.JoinReply)
	if rej, ok := w.joinAs(credB, group.Join{Group: "g", InstanceID: "svc-1"}).(group.Rejected); !ok || rej.Code != api.CodeConflict {
		t.Fatalf("static join by another credential: %#v", w.replies[w.ref])
	}
	if !w.isMember("g", r.MemberID) || len(w.owners("g")) != 2 {
		t.Fatalf("the member lost its place: %+v", w.describe("g"))
	}
	if _, ok := w.joinAs(credA, group.Join{Group: "g", InstanceID: "svc-1"}).(group.JoinReply); !ok || w.isMember("g", r.MemberID) {
		t.Fatalf("static replacement by the same credential: %#v", w.replies[w.ref])
	}
}

// Denying a credential ends every member it opened, in every group: they
// leave, their capabilities are refused on the gateways (revoked members
// on the sync log), their partitions go to the others, and joins with it
// are refused. Members of other credentials are untouched.
func TestDenyingACredentialRevokesItsMembers(t *testing.T) {
	w := newWorld(t)
	w.topics(map[string]int32{"t": 4})
	w.pollUntilParked("gw1")
	a1 := w.joinAs(credA, group.Join{Group: "g"}).(group.JoinReply).MemberID
	a2 := w.joinAs(credA, group.Join{Group: "h"}).(group.JoinReply).MemberID
	b := w.joinAs(credB, group.Join{Group: "g"}).(group.JoinReply).MemberID
	w.settle("g")
	from := len(w.sent)
	ref := w.nextRef()
	w.step(group.DenyJTI{Ref: ref, JTI: credA.ID, Expires: w.now.Add(time.Hour)})
	mustReply[group.Done](t, w, ref)
	if w.isMember("g", a1) || w.isMember("h", a2) || !w.isMember("g", b) {
		t.Fatalf("after the deny: g %+v, h %+v", w.describe("g").Members, w.describe("h").Members)
	}
	w.heartbeat(b)
	w.settleGateways()
	if owners := w.owners("g"); len(owners) != 4 {
		t.Fatalf("owners %v", owners)
	} else {
		for p, o := range owners {
			if o != b {
				t.Fatalf("%v owned by %s", p, o)
			}
		}
	}
	revoked := map[string]bool{}
	for _, msg := range w.sent[from:] {
		if s, ok := msg.(group.SyncReply); ok {
			for _, r := range s.RevokedMembers {
				revoked[r.Group+"/"+r.MemberID] = true
			}
		}
	}
	if !revoked["g/"+a1] || !revoked["h/"+a2] || revoked["g/"+b] {
		t.Fatalf("revoked members on the sync log: %v", revoked)
	}
	if rej, ok := w.joinAs(credA, group.Join{Group: "g"}).(group.Rejected); !ok || rej.Code != api.CodeCapabilityRevoked {
		t.Fatalf("join with the denied credential: %#v", w.replies[w.ref])
	}
}

// The binding survives a restart: after Restore another credential still
// cannot rejoin the member, and denying its credential still ends it.
func TestCredentialBindingSurvivesRestart(t *testing.T) {
	w := newWorld(t)
	w.topics(map[string]int32{"t": 2})
	id := w.joinAs(credA, group.Join{Group: "g", SessionTimeout: time.Minute}).(group.JoinReply).MemberID
	w.restart(time.Second)
	if got := w.describe("g").Members; len(got) != 1 || got[0].Credential != credA {
		t.Fatalf("restored members %+v", got)
	}
	if rej, ok := w.joinAs(credB, group.Join{Group: "g", MemberID: id}).(group.Rejected); !ok || rej.Code != api.CodeUnknownMember {
		t.Fatalf("rejoin by another credential after restart: %#v", w.replies[w.ref])
	}
	ref := w.nextRef()
	w.step(group.DenyJTI{Ref: ref, JTI: credA.ID, Expires: w.now.Add(time.Hour)})
	if w.isMember("g", id) {
		t.Fatal("the denied credential's member survived the restart")
	}
}
