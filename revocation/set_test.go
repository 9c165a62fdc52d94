package revocation

import (
	"reflect"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/ocap"
	"github.com/capgate/capgate/revocation/revocationtest"
)

var t0 = time.Unix(1_800_000_000, 0)

func capability(id string, chain ...string) *ocap.Claims {
	p := int32(3)
	return &ocap.Claims{Subject: "m1", ID: id, Group: "g", Topic: "t", Partition: &p, Epoch: 5, Chain: chain,
		ExpiresAt: ocap.Seconds(t0.Unix() + 60)}
}

func TestRuleLapse(t *testing.T) {
	r := Rule{Leeway: 2 * time.Second, MaxClockSkew: 500 * time.Millisecond}
	exp := t0.Unix()
	if got, want := r.Lapse(exp), t0.Add(2500*time.Millisecond); !got.Equal(want) {
		t.Fatalf("lapse %v, want %v", got, want)
	}
	if !r.Holds(exp, t0.Add(2499*time.Millisecond)) || r.Holds(exp, t0.Add(2500*time.Millisecond)) {
		t.Fatal("holds must end exactly at exp + leeway + skew")
	}
	if c := r.Cover(Rule{Leeway: time.Second, MaxClockSkew: time.Second}); c != (Rule{Leeway: 2 * time.Second, MaxClockSkew: time.Second}) {
		t.Fatalf("cover %+v", c)
	}
	if err := (Rule{Leeway: -1}).Validate(); err == nil {
		t.Fatal("negative leeway accepted")
	}
	if got := FromSettings(api.CoordinatorSettings{LeewayMs: 2000, MaxClockSkewMs: 500}); got != r {
		t.Fatalf("from settings %+v", got)
	}
}

// Check refuses in the order fence, deny (own jti, then ancestors), member;
// entries only count while they hold.
func TestCheck(t *testing.T) {
	s := New(Rule{Leeway: time.Second})
	c := capability("c1", "root", "parent")
	if v := s.Check(c, t0); v != Allow {
		t.Fatalf("empty set: %s", v)
	}
	s.RevokeMember(MemberKey{"g", "m1"}, t0.Unix()+10)
	if v := s.Check(c, t0); v != RevokedMember {
		t.Fatalf("revoked member: %s", v)
	}
	if v := s.Check(c, t0.Add(11*time.Second)); v != Allow {
		t.Fatalf("revoked member after until + leeway: %s", v)
	}
	s.Deny("root", t0.Unix()+10)
	if v := s.Check(c, t0); v != Denied {
		t.Fatalf("denied ancestor: %s", v)
	}
	s.Raise(FenceKey{"g", "t", 3}, 6)
	if v := s.Check(c, t0); v != Fenced {
		t.Fatalf("fenced: %s", v)
	}
	if s.Raise(FenceKey{"g", "t", 3}, 4) || s.Fence(FenceKey{"g", "t", 3}) != 6 {
		t.Fatal("a fence went down")
	}
	admin := capability("c2")
	admin.Group, admin.Epoch = "", 0
	if v := s.Check(admin, t0); v != Allow {
		t.Fatalf("a capability without a group is neither fenced nor a member's: %s", v)
	}
}

func TestDenyKeepsTheLaterTimeAndPruneReturnsWhatLapsed(t *testing.T) {
	s := New(Rule{Leeway: time.Second, MaxClockSkew: time.Second})
	if !s.Deny("a", t0.Unix()+5) || s.Deny("a", t0.Unix()+1) {
		t.Fatal("Deny reports a new id only")
	}
	if exp, _ := s.DenyExp("a"); exp != t0.Unix()+5 {
		t.Fatalf("exp %d went back", exp)
	}
	s.Deny("b", t0.Unix())
	s.RevokeMember(MemberKey{"g", "m"}, t0.Unix())
	denied, members := s.Prune(t0.Add(2 * time.Second))
	if !reflect.DeepEqual(denied, []api.Denied{{JTI: "b", Exp: t0.Unix()}}) ||
		!reflect.DeepEqual(members, []api.RevokedMember{{Group: "g", MemberID: "m", Until: t0.Unix()}}) {
		t.Fatalf("pruned %v %v", denied, members)
	}
	if d, m := s.Len(); d != 1 || m != 0 || !s.DeniedAt("a", t0.Add(6*time.Second)) || s.DeniedAt("a", t0.Add(7*time.Second)) {
		t.Fatalf("after prune: %v", s.Denied())
	}
}

// The table every holder runs, here with the plainest verifier: expired
// at exp + leeway, else the set's verdict.
func TestRevocationTable(t *testing.T) {
	for _, tc := range revocationtest.Cases() {
		s := New(Rule{Leeway: tc.Leeway, MaxClockSkew: tc.MaxClockSkew})
		deny := t0.Unix()
		c := capability("tok")
		c.ExpiresAt = ocap.Seconds(time.Unix(deny, 0).Add(tc.TokenAfter).Unix())
		s.Deny(c.ID, deny)
		now := time.Unix(deny, 0).Add(tc.At)
		got := revocationtest.Allowed
		switch {
		case !now.Before(time.Unix(int64(c.ExpiresAt), 0).Add(tc.Leeway)):
			got = revocationtest.Expired
		case s.Check(c, now) != Allow:
			got = revocationtest.Revoked
		}
		if got != tc.Want {
			t.Errorf("%s: %s, want %s", tc.Name, got, tc.Want)
		}
	}
}

func BenchmarkCheck(b *testing.B) {
	s := New(Rule{Leeway: 2 * time.Second, MaxClockSkew: time.Second})
	for i := range 1000 {
		s.Deny(string(rune('a'+i%26))+"-"+time.Duration(i).String(), t0.Unix()+60)
	}
	c := capability("c1", "root")
	b.ReportAllocs()
	for b.Loop() {
		if s.Check(c, t0) != Allow {
			b.Fatal("refused")
		}
	}
}

// Grow makes room for a bulk of new fences without losing one: the
// fences held before stay (they still refuse, and only rise), and a
// smaller addition leaves the map as it is.
func TestGrowKeepsFences(t *testing.T) {
	s := New(Rule{})
	for p := range int32(300) {
		s.Raise(FenceKey{"g", "t", p}, 6)
	}
	s.Grow(10) // below growMin: nothing to do
	s.Grow(10_000)
	for p := range int32(300) {
		if got := s.Fence(FenceKey{"g", "t", p}); got != 6 {
			t.Fatalf("fence of partition %d after Grow: %d, want 6", p, got)
		}
	}
	if v := s.Check(capability("c1"), t0); v != Fenced {
		t.Fatalf("epoch 5 under fence 6 after Grow: %s", v)
	}
	if s.Raise(FenceKey{"g", "t", 3}, 5) {
		t.Fatal("Raise lowered a fence after Grow")
	}
	for p := range int32(10_000) {
		s.Raise(FenceKey{"bulk-g", "bulk", p}, 2)
	}
	if n := len(s.Fences()); n != 10_300 {
		t.Fatalf("%d fences, want 10,300", n)
	}
}

// TestRetainKeepsLapsedEntries: Retain keeps an entry past its lapse
// before Prune drops it, and changes nothing Check answers at any
// instant: a check at now − Retain (the coordinator's renewal grace)
// still sees an entry that held then.
func TestRetainKeepsLapsedEntries(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	r := Rule{Leeway: 2 * time.Second, MaxClockSkew: time.Second, Retain: 5 * time.Second}
	s := New(r)
	s.Deny("j", t0.Unix())
	c := &ocap.Claims{ID: "j"}
	lapse := t0.Add(3 * time.Second)
	if s.Check(c, lapse.Add(-time.Millisecond)) != Denied || s.Check(c, lapse) != Allow {
		t.Fatal("Retain changed when the entry holds")
	}
	if d, _ := s.Prune(lapse.Add(4 * time.Second)); len(d) != 0 || s.Check(c, lapse.Add(4*time.Second-5*time.Second)) != Denied {
		t.Fatal("an entry pruned before its lapse + Retain, or not seen by a check at now - Retain")
	}
	if d, _ := s.Prune(lapse.Add(5 * time.Second)); len(d) != 1 {
		t.Fatalf("pruned %v at lapse + Retain, want the entry", d)
	}
	if err := (Rule{Retain: -1}).Validate(); err == nil {
		t.Fatal("negative retain accepted")
	}
}
