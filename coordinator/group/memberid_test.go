package group_test

import (
	"strings"
	"testing"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/group"
	"github.com/capgate/capgate/ocap"
)

// TestMemberIDAlwaysAName: whatever the client id's length, the member
// id the machine makes is a name (at most group.MemberIDMax characters)
// that starts with as much of the client id as fits. A client id of
// 239-255 characters made a 256-272-character id: no member token could
// carry it and no admin route could name the member.
func TestMemberIDAlwaysAName(t *testing.T) {
	w := newWorld(t)
	w.topics(map[string]int32{"t": 2})
	for _, n := range []int{0, 1, 237, 238, 239, 254, 255, 256, 1000} {
		clientID := strings.Repeat("c", n)
		ref := w.nextRef()
		w.step(group.Join{Ref: ref, Group: "g", ClientID: clientID, Topics: []string{"t"}})
		id := mustReply[group.JoinReply](t, w, ref).MemberID
		if len(id) > group.MemberIDMax || !ocap.ValidName(id) {
			t.Fatalf("client id of %d characters: member id of %d is not a name: %q", n, len(id), id)
		}
		prefix := clientID[:min(n, group.MemberIDMax-17)] + "-"
		if n == 0 {
			prefix = "member-"
		}
		if !strings.HasPrefix(id, prefix) || len(id) != len(prefix)+16 {
			t.Fatalf("client id of %d characters: member id %q, want %q and 16 hex digits", n, id, prefix)
		}
		if !w.isMember("g", id) {
			t.Fatalf("member %q not in the group", id)
		}
	}
}

// TestUndoJoin: the shell undoes a join it could not answer; the member
// goes and its partitions go to the member that is left; undoing it
// again is unknown_member.
func TestUndoJoin(t *testing.T) {
	w := newWorld(t)
	w.topics(map[string]int32{"t": 4})
	w.settleGateways()
	stays := w.join("g", "a", "t")
	ref := w.nextRef()
	w.step(group.Join{Ref: ref, Group: "g", ClientID: "ghost", Topics: []string{"t"}})
	ghost := mustReply[group.JoinReply](t, w, ref).MemberID

	ref = w.nextRef()
	w.step(group.UndoJoin{Ref: ref, Group: "g", MemberID: ghost})
	mustReply[group.Done](t, w, ref)
	if w.isMember("g", ghost) {
		t.Fatalf("member %s stayed after UndoJoin", ghost)
	}
	w.settle("g")
	for p, owner := range w.owners("g") {
		if owner != stays {
			t.Fatalf("%v owned by %q, want %s", p, owner, stays)
		}
	}
	if n := len(w.owners("g")); n != 4 {
		t.Fatalf("%d partitions owned, want 4 by %s", n, stays)
	}
	ref = w.nextRef()
	w.step(group.UndoJoin{Ref: ref, Group: "g", MemberID: ghost})
	mustReject(t, w, ref, api.CodeUnknownMember)
}
