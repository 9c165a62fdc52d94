package timeline_test

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/group"
	"github.com/capgate/capgate/coordinator/timeline"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// shell drives a real machine the way the coordinator's loop does, and
// feeds every Ready to the feed.
type shell struct {
	t    *testing.T
	m    *group.Machine
	feed *timeline.Feed
	now  time.Time
	ref  group.Ref
}

func newShell(t *testing.T, size int) *shell {
	cfg := group.DefaultConfig()
	cfg.InitialAssignDelay = 0 // a join is answered, with its grants, in its own step (group/window.go)
	m, err := group.New(cfg, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	return &shell{t: t, m: m, feed: timeline.New(size, 2), now: t0}
}

// step steps ev (built with a fresh Ref) and returns the messages of the
// Ready, after the feed observed it.
func (s *shell) step(build func(group.Ref) group.Event) []group.Message {
	s.ref++
	s.m.Step(s.now, build(s.ref))
	if !s.m.HasReady() {
		return nil
	}
	rd, err := s.m.Ready()
	if err != nil {
		s.t.Fatal(err)
	}
	s.feed.Observe(s.now, rd, s.m)
	s.m.Advance()
	return rd.Messages
}

func (s *shell) later(d time.Duration) { s.now = s.now.Add(d) }

func kinds(events []timeline.Event) []string {
	var out []string
	for _, e := range events {
		out = append(out, string(e.Kind))
	}
	return out
}

func find[M group.Message](msgs []group.Message) (M, bool) {
	for _, m := range msgs {
		if v, ok := m.(M); ok {
			return v, true
		}
	}
	var zero M
	return zero, false
}

// TestHandoffTimeline runs one move through a real machine — A holds 4
// partitions, B joins, A commits and releases, the gateway acks — and
// checks the feed tells it in order: fence, commit, release, ack, grant
// with the pause since the fence.
func TestHandoffTimeline(t *testing.T) {
	s := newShell(t, 100)
	s.step(func(group.Ref) group.Event { return group.Topics{Partitions: map[string]int32{"orders": 4}} })
	reset, _ := find[group.SyncReply](s.step(func(r group.Ref) group.Event { return group.SyncPoll{Ref: r, Gateway: "gw1"} }))
	s.step(func(r group.Ref) group.Event { // acks the snapshot; held
		return group.SyncPoll{Ref: r, Gateway: "gw1", After: reset.Seq, Wait: time.Minute}
	})
	joinA, _ := find[group.JoinReply](s.step(func(r group.Ref) group.Event {
		return group.Join{Ref: r, Group: "g", ClientID: "a", Topics: []string{"orders"}}
	}))
	if len(joinA.Grants) != 4 {
		t.Fatalf("A got %d grants, want 4", len(joinA.Grants))
	}
	start := s.feed.Last()

	s.later(10 * time.Millisecond)
	msgs := s.step(func(r group.Ref) group.Event {
		return group.Join{Ref: r, Group: "g", ClientID: "b", Topics: []string{"orders"}}
	})
	joinB, _ := find[group.JoinReply](msgs)
	fenceReply, ok := find[group.SyncReply](msgs) // the held poll carries the fences
	if !ok || len(fenceReply.Fences) != 2 {
		t.Fatalf("held poll answered %+v, want 2 fences", fenceReply)
	}
	news, _ := find[group.News](s.step(func(r group.Ref) group.Event {
		return group.Heartbeat{Ref: r, Group: "g", MemberID: joinA.MemberID}
	}))
	s.later(3 * time.Millisecond)
	var offsets []group.CommitOffset
	for _, rv := range news.Revoke {
		offsets = append(offsets, group.CommitOffset{Topic: rv.Topic, Partition: rv.Partition, Epoch: rv.Epoch, Offset: 42})
	}
	s.step(func(r group.Ref) group.Event {
		return group.Commit{Ref: r, Group: "g", MemberID: joinA.MemberID, Offsets: offsets, Release: true}
	})
	s.later(4 * time.Millisecond)
	s.step(func(r group.Ref) group.Event {
		return group.SyncPoll{Ref: r, Gateway: "gw1", After: fenceReply.Seq, Wait: time.Minute}
	})

	sub, err := s.feed.Subscribe(start)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	got, lagged := sub.Read(nil, 100)
	t.Log("\n" + texts(got))
	want := []string{"join", "fence", "fence", "commit", "commit", "release", "release", "ack", "grant", "grant"}
	if lagged || !slices.Equal(kinds(got), want) {
		t.Fatalf("events %v (lagged %v), want %v\n%s", kinds(got), lagged, want, texts(got))
	}
	for _, e := range got {
		switch e.Kind {
		case timeline.Join:
			if e.Member != joinB.MemberID || e.Group != "g" {
				t.Errorf("join event %+v", e)
			}
		case timeline.Fence:
			if e.From != joinA.MemberID || e.To != joinB.MemberID || e.Epoch == 0 {
				t.Errorf("fence event %+v", e)
			}
		case timeline.Commit:
			if e.Offset != 42 || e.From != joinA.MemberID {
				t.Errorf("commit event %+v", e)
			}
		case timeline.Ack:
			if e.Gateway != "gw1" || e.SyncSeq != fenceReply.Seq || !strings.Contains(e.Text, "and") && !strings.Contains(e.Text, ",") {
				t.Errorf("ack event %+v", e)
			}
		case timeline.Grant:
			if !e.Moved || e.PauseMs != 7 || e.To != joinB.MemberID || e.From != joinA.MemberID {
				t.Errorf("grant event %+v, want a move from A to B paused 7 ms", e)
			}
		}
	}
	for i := 1; i < len(got); i++ {
		if got[i].ID != got[i-1].ID+1 {
			t.Fatalf("ids not consecutive: %d then %d", got[i-1].ID, got[i].ID)
		}
	}
}

func texts(events []timeline.Event) string {
	var b strings.Builder
	for _, e := range events {
		b.WriteString(e.Text + "\n")
	}
	return b.String()
}

// TestAdminRevokeTimeline: an admin revoke shows its fence, the gateway's
// ack, the regrant and the revoke's answer with the new epoch.
func TestAdminRevokeTimeline(t *testing.T) {
	s := newShell(t, 100)
	s.step(func(group.Ref) group.Event { return group.Topics{Partitions: map[string]int32{"orders": 2}} })
	reset, _ := find[group.SyncReply](s.step(func(r group.Ref) group.Event { return group.SyncPoll{Ref: r, Gateway: "gw1"} }))
	s.step(func(r group.Ref) group.Event {
		return group.SyncPoll{Ref: r, Gateway: "gw1", After: reset.Seq, Wait: time.Minute}
	})
	join, _ := find[group.JoinReply](s.step(func(r group.Ref) group.Event {
		return group.Join{Ref: r, Group: "g", ClientID: "a", Topics: []string{"orders"}}
	}))
	start := s.feed.Last()
	fenced, _ := find[group.SyncReply](s.step(func(r group.Ref) group.Event {
		return group.RevokePartition{Ref: r, Group: "g", Topic: "orders", Partition: 1}
	}))
	s.later(2 * time.Millisecond)
	msgs := s.step(func(r group.Ref) group.Event {
		return group.SyncPoll{Ref: r, Gateway: "gw1", After: fenced.Seq, Wait: time.Minute}
	})
	reply, ok := find[group.RevokeReply](msgs)
	if !ok {
		t.Fatalf("revoke not answered after the ack: %+v", msgs)
	}
	got := s.feed.Recent(100, func(e *timeline.Event) bool { return e.ID > start })
	var sawAck, sawRevoked bool
	for _, e := range got {
		sawAck = sawAck || e.Kind == timeline.Ack && e.Gateway == "gw1"
		sawRevoked = sawRevoked || e.Kind == timeline.Revoked && e.Epoch == reply.Epoch && e.Partition == 1
	}
	if got[0].Kind != timeline.Fence || got[0].From != join.MemberID || !sawAck || !sawRevoked {
		t.Fatalf("events:\n%s", texts(got))
	}
}

// TestSlowSubscriberNeverBlocks: a subscriber that never reads does not
// slow publishing; when it reads it learns it lagged and resumes at the
// oldest event kept. Subscribers are bounded.
func TestSlowSubscriberNeverBlocks(t *testing.T) {
	s := newShell(t, 8)
	slow, err := s.feed.Subscribe(0)
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.feed.Subscribe(0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.feed.Subscribe(0); err != timeline.ErrTooManySubscribers {
		t.Fatalf("third subscriber: %v, want ErrTooManySubscribers", err)
	}
	other.Close()
	for i := range 20 { // 20 groups: 20 config events, 2.5 rings' worth
		name := "g" + string(rune('a'+i))
		s.step(func(r group.Ref) group.Event { return group.SetGroupConfig{Ref: r, Group: name} })
	}
	select {
	case <-slow.Ready():
	default:
		t.Fatal("subscriber not poked")
	}
	got, lagged := slow.Read(nil, 3)
	if !lagged || len(got) != 3 || got[0].ID != s.feed.Last()-7 {
		t.Fatalf("lagged %v, %d events from %d; want lagged, 3 from %d", lagged, len(got), got[0].ID, s.feed.Last()-7)
	}
	select {
	case <-slow.Ready(): // more left: still ready
	default:
		t.Fatal("subscriber with unread events not ready")
	}
	rest, lagged := slow.Read(nil, 100)
	if lagged || len(rest) != 5 || rest[4].ID != s.feed.Last() {
		t.Fatalf("rest: lagged %v, %d events", lagged, len(rest))
	}
	if n := s.feed.Subscribers(); n != 1 {
		t.Fatalf("%d subscribers, want 1", n)
	}
}

// TestQoSEventNamesItsSelector: a QoS override's event carries its
// selector (group, topic, partition, holder) and says it, so a group's
// page shows the override of its group; one naming no group belongs on
// every group's page (it applies to all their holders), another group's
// on none but its own. Before, the event had no group: no group page
// showed it, and its text named no selector.
func TestQoSEventNamesItsSelector(t *testing.T) {
	s := newShell(t, 100)
	p3 := int32(3)
	put := func(o api.QoSOverride) timeline.Event {
		t.Helper()
		start := s.feed.Last()
		s.step(func(r group.Ref) group.Event { return group.PutQoS{Ref: r, Override: o} })
		got := s.feed.Recent(10, func(e *timeline.Event) bool { return e.ID > start })
		if len(got) != 1 || got[0].Kind != timeline.QoS {
			t.Fatalf("events of a QoS override: %s", texts(got))
		}
		return got[0]
	}
	until := s.now.Add(time.Minute).Unix()
	e := put(api.QoSOverride{ID: "q1", Selector: api.QoSSelector{Group: "orders", Topic: "demo", Partition: &p3, Holder: "h"}, MaxBytesPerSec: 2000, Until: until})
	if e.Group != "orders" || e.Topic != "demo" || e.Partition != 3 || e.Member != "h" ||
		!strings.HasPrefix(e.Text, "QoS override q1 of group=orders, topic=demo, holder=h, partition=3: 2000 B/s until ") {
		t.Fatalf("set: %+v", e)
	}
	if !e.Of("orders") || e.Of("billing") {
		t.Fatalf("the override of group orders: Of(orders) %v, Of(billing) %v", e.Of("orders"), e.Of("billing"))
	}
	e = put(api.QoSOverride{ID: "q2", Selector: api.QoSSelector{Topic: "demo"}, LogLevel: "debug", Until: until})
	if e.Group != "" || e.Partition != -1 || !e.Of("orders") || !e.Of("billing") {
		t.Fatalf("an override of every group: %+v, Of(orders) %v, Of(billing) %v", e, e.Of("orders"), e.Of("billing"))
	}
	e = put(api.QoSOverride{ID: "q1", Selector: api.QoSSelector{Group: "orders", Topic: "demo", Partition: &p3, Holder: "h"}, Until: s.now.Unix()})
	if e.Group != "orders" || e.Text != "QoS override q1 of group=orders, topic=demo, holder=h, partition=3 ended" {
		t.Fatalf("ended: %+v", e)
	}
}

// TestReleaseWithoutOffsetIsNoCommit: a release without an offset
// persists the partition's offset record again, its offset unchanged and
// only its epoch the releasing one's (OffsetRecord.Kept, for a repeat of
// the release to be known): the feed tells a release, not a commit of
// the offset the holder left standing. A record with a new offset while
// revoking is the holder's commit.
func TestReleaseWithoutOffsetIsNoCommit(t *testing.T) {
	s := newShell(t, 100)
	revoking := group.PartitionRecord{Group: "g", Topic: "orders", Partition: 0, Epoch: 2, State: group.Revoking,
		Holder: "a", HolderEpoch: 1, Target: "b", RevokeStarted: s.now}
	s.feed.Observe(s.now, group.Ready{Persist: []group.Record{revoking}}, s.m)
	start := s.feed.Last()
	released := revoking
	released.Released = true
	offset := group.OffsetRecord{Group: "g", Topic: "orders", Partition: 0, Offset: 42, Epoch: 1, Kept: true}
	s.feed.Observe(s.now, group.Ready{Persist: []group.Record{offset, released}}, s.m)
	sub, err := s.feed.Subscribe(start)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if got, _ := sub.Read(nil, 100); !slices.Equal(kinds(got), []string{"release"}) {
		t.Fatalf("events %v, want [release]\n%s", kinds(got), texts(got))
	}
}
