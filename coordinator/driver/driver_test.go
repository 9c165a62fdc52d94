package driver_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/coordinator/driver"
	"github.com/capgate/capgate/coordinator/group"
	"github.com/capgate/capgate/store"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// failing is the real store with a switch that makes every Update fail
// (a full disk, or a Kafka-log writer fenced by a newer leader) before
// anything is written.
type failing struct {
	*store.Store
	err     error
	updates int
}

func (f *failing) Update(fn func(w *store.Writer) error) error {
	f.updates++
	if f.err != nil {
		return f.err
	}
	return f.Store.Update(fn)
}

// recorder is an Observer that keeps what it saw.
type recorder struct {
	events []string
}

func (r *recorder) Persisted(rd group.Ready) {
	r.events = append(r.events, fmt.Sprintf("persisted %d", len(rd.Persist)))
}
func (r *recorder) Sending(_ time.Time, rd group.Ready, _ *group.Machine) {
	r.events = append(r.events, fmt.Sprintf("sent %d", len(rd.Messages)))
}

type env struct {
	d     *driver.Driver
	m     *group.Machine
	store *failing
	obs   *recorder
	got   map[group.Ref]group.Message
}

func newEnv(t *testing.T) *env {
	t.Helper()
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg := group.DefaultConfig()
	cfg.InitialAssignDelay = 0 // a join is answered, with its grants, in its own Flush (group/window.go)
	m, err := group.New(cfg, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	e := &env{m: m, store: &failing{Store: st}, obs: &recorder{}, got: map[group.Ref]group.Message{}}
	e.d = driver.New(m, e.store, e.obs, driver.Restored{})
	e.d.Submit(func(group.Ref) group.Event { return group.Topics{Partitions: map[string]int32{"t": 2}} }, nil)
	if err := e.d.Flush(t0); err != nil {
		t.Fatal(err)
	}
	return e
}

// submit gathers ev and records its answer.
func (e *env) submit(build func(group.Ref) group.Event) group.Ref {
	return e.d.Submit(build, func(msg group.Message) {
		ref := msg.Request()
		if _, dup := e.got[ref]; dup {
			panic(fmt.Sprintf("ref %d answered twice", ref))
		}
		e.got[ref] = msg
	})
}

func joinEvent(ref group.Ref) group.Event {
	return group.Join{Ref: ref, Group: "g", Topics: []string{"t"}}
}

// TestPersistBeforeSend: a Ready's answer reaches its request only after
// its records were written, and in that order for the observer.
func TestPersistBeforeSend(t *testing.T) {
	e := newEnv(t)
	e.obs.events = nil
	ref := e.submit(joinEvent)
	if _, ok := e.got[ref]; ok {
		t.Fatal("answered before Flush")
	}
	if err := e.d.Flush(t0); err != nil {
		t.Fatal(err)
	}
	reply, ok := e.got[ref].(group.JoinReply)
	if !ok || len(reply.Grants) != 2 {
		t.Fatalf("join answered %#v, want a reply with 2 grants", e.got[ref])
	}
	snap, err := e.store.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Groups) != 1 || len(snap.Groups[0].Members) != 1 || snap.Groups[0].Partitions[0].Epoch != 1 {
		t.Fatalf("store holds %+v; want the member and epoch 1 persisted", snap.Groups)
	}
	if want := fmt.Sprint([]string{"persisted 4", "sent 1"}); fmt.Sprint(e.obs.events) != want {
		t.Fatalf("observer saw %v, want %v", e.obs.events, want)
	}
}

// TestFailClosed: when the store refuses a Ready (here: fenced by a newer
// writer) or the machine's audit refuses it, nothing of it is sent, every
// waiting request gets Unavailable, later ones too, and Failure says why.
// Unavailable says which the machine had taken (Taken: the held poll,
// the join in the refused Ready — they may have been applied) and which
// it never saw (a request after the failure: nothing applied).
func TestFailClosed(t *testing.T) {
	fenced := &store.FencedError{Log: "state/0", TransactionalID: "capgate-0"}
	cases := []struct {
		name  string
		plant func(e *env)
		want  error
	}{
		{"store fenced", func(e *env) { e.store.err = fmt.Errorf("store: commit: %w", fenced) }, store.ErrFenced},
		{"unsafe Ready", func(e *env) { e.m.PlantUnsafeReady() }, group.ErrUnsafe},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			held := e.submit(func(ref group.Ref) group.Event {
				return group.SyncPoll{Ref: ref, Gateway: "gw", After: 0, Wait: time.Second}
			})
			if err := e.d.Flush(t0); err != nil {
				t.Fatal(err)
			}
			poll := e.got[held].(group.SyncReply)
			held = e.submit(func(ref group.Ref) group.Event {
				return group.SyncPoll{Ref: ref, Gateway: "gw", After: poll.Seq, Wait: time.Minute}
			})
			if err := e.d.Flush(t0); err != nil || e.got[held] != nil {
				t.Fatalf("poll after=%d not held: %v %v", poll.Seq, e.got[held], err)
			}
			c.plant(e)
			updates := e.store.updates
			ref := e.submit(joinEvent)
			err := e.d.Flush(t0)
			if !errors.Is(err, c.want) || !errors.Is(e.d.Failure(), c.want) {
				t.Fatalf("Flush: %v, Failure: %v; want %v", err, e.d.Failure(), c.want)
			}
			for _, r := range []group.Ref{held, ref} {
				if u, ok := e.got[r].(driver.Unavailable); !ok || !u.Taken {
					t.Fatalf("request %d answered %#v, want Unavailable, taken: nothing of the refused Ready may be sent", r, e.got[r])
				}
			}
			later := e.submit(joinEvent)
			if u, ok := e.got[later].(driver.Unavailable); !ok || u.Taken {
				t.Fatalf("a request after the failure got %#v, want Unavailable at once, not taken", e.got[later])
			}
			if e.d.Flush(t0.Add(time.Second)) == nil || e.d.Tick(t0.Add(time.Hour)) == nil {
				t.Fatal("the failed driver runs again")
			}
			if _, ok := e.d.NextDeadline(); ok {
				t.Fatal("a failed driver still has a timer")
			}
			if c.name == "unsafe Ready" && e.store.updates != updates {
				t.Fatalf("the refused Ready reached the store (%d updates)", e.store.updates-updates)
			}
		})
	}
}

// TestSendOnFailedPersistIsABug: the planted bug fails open; the test
// only shows the switch does what the simulation relies on.
func TestSendOnFailedPersistIsABug(t *testing.T) {
	e := newEnv(t)
	e.d.Plant(driver.Bugs{SendOnFailedPersist: true})
	e.store.err = errors.New("disk full")
	ref := e.submit(joinEvent)
	if err := e.d.Flush(t0); err != nil {
		t.Fatalf("Flush with the planted bug: %v", err)
	}
	if _, ok := e.got[ref].(group.JoinReply); !ok {
		t.Fatalf("join answered %#v; the planted bug sends anyway", e.got[ref])
	}
}

// TestQuerySeesPersistedState: a query runs after what was gathered
// before it was persisted and sent.
func TestQuerySeesPersistedState(t *testing.T) {
	e := newEnv(t)
	ref := e.submit(joinEvent)
	var members int
	if err := e.d.Query(t0, func(m *group.Machine) {
		d, _ := m.DescribeGroup("g")
		members = len(d.Members)
	}); err != nil {
		t.Fatal(err)
	}
	if members != 1 || e.got[ref] == nil {
		t.Fatalf("query saw %d members, join answered %v; want the join persisted and answered first", members, e.got[ref])
	}
}

// TestCloseAnswersEveryone: Close answers every held request Unavailable
// (in Ref order), is not a failure, and refuses what comes after. A held
// heartbeat was taken by the machine; a join gathered but not stepped
// yet was not (nothing of it applied).
func TestCloseAnswersEveryone(t *testing.T) {
	e := newEnv(t)
	ref := e.submit(joinEvent)
	if err := e.d.Flush(t0); err != nil {
		t.Fatal(err)
	}
	member := e.got[ref].(group.JoinReply).MemberID
	hb := e.submit(func(ref group.Ref) group.Event {
		return group.Heartbeat{Ref: ref, Group: "g", MemberID: member, Wait: time.Minute}
	})
	if err := e.d.Flush(t0); err != nil || e.d.HeldHeartbeats() != 1 {
		t.Fatalf("heartbeat not held: %v, %d held", err, e.d.HeldHeartbeats())
	}
	gathered := e.submit(joinEvent)
	e.d.Close()
	if u, ok := e.got[hb].(driver.Unavailable); !ok || !u.Taken || e.d.HeldHeartbeats() != 0 || e.d.Failure() != nil || !e.d.Stopped() {
		t.Fatalf("after Close: heartbeat %#v, %d held, failure %v, stopped %t", e.got[hb], e.d.HeldHeartbeats(), e.d.Failure(), e.d.Stopped())
	}
	if u, ok := e.got[gathered].(driver.Unavailable); !ok || u.Taken {
		t.Fatalf("after Close: the join never stepped answered %#v, want Unavailable, not taken", e.got[gathered])
	}
}

// TestRestoreRoundTrip: what the driver persisted, Load turns back into
// a snapshot from which group.Restore rebuilds the same ownership, with
// the flags the store has no column for (released, outside holders).
func TestRestoreRoundTrip(t *testing.T) {
	e := newEnv(t)
	// A gateway that never acknowledges keeps the handoffs below open.
	e.submit(func(ref group.Ref) group.Event { return group.SyncPoll{Ref: ref, Gateway: "gw"} })
	ref := e.submit(joinEvent)
	e.d.Flush(t0)
	member := e.got[ref].(group.JoinReply).MemberID
	commit := e.submit(func(ref group.Ref) group.Event {
		return group.Commit{Ref: ref, Group: "g", MemberID: member, Release: true,
			Offsets: []group.CommitOffset{{Topic: "t", Partition: 0, Epoch: 1, Offset: 7}}}
	})
	e.submit(func(ref group.Ref) group.Event {
		return group.Lease{Ref: ref, Group: "g", Topic: "t", Partition: 1, Holder: "outsider", TTL: time.Hour}
	})
	e.d.Flush(t0)
	if _, ok := e.got[commit].(group.CommitReply); !ok {
		t.Fatalf("release answered %#v", e.got[commit])
	}
	var before group.GroupDescription
	e.d.Query(t0, func(m *group.Machine) { before, _ = m.DescribeGroup("g") })
	m, _ := e.reload(t)
	after, _ := m.DescribeGroup("g")
	for i, p := range before.Partitions {
		q := after.Partitions[i]
		if p.Epoch != q.Epoch || p.State != q.State || p.Owner != q.Owner || p.OwnerOutside != q.OwnerOutside ||
			p.Target != q.Target || p.Released != q.Released || p.Committed != q.Committed || p.LeaseOutside != q.LeaseOutside {
			t.Errorf("partition %d: before %+v\nafter  %+v", i, p, q)
		}
	}
	if before.Partitions[0].State != group.Revoking || !before.Partitions[0].Released || !before.Partitions[1].TargetOutside {
		t.Fatalf("the round trip misses the flags it is meant to carry: %+v", before.Partitions)
	}
}

// A group's creator and its name go through the store and back (in the
// group's config value), and a value written before creators were kept
// reads as created by nobody.
func TestGroupCreatorRoundTrip(t *testing.T) {
	e := newEnv(t)
	ref := e.submit(func(ref group.Ref) group.Event {
		return group.Join{Ref: ref, Group: "g", Topics: []string{"t"}, Credential: group.Credential{ID: "jti-a", Subject: "orders-svc"}}
	})
	e.d.Flush(t0)
	if _, ok := e.got[ref].(group.JoinReply); !ok {
		t.Fatalf("join: %#v", e.got[ref])
	}
	old, _ := json.Marshal(group.GroupConfig{Assignor: "sticky", SessionTimeout: 10 * time.Second, HandoffTimeout: 10 * time.Second,
		MaxMovesPerSecond: 2, OffsetReset: group.OffsetResetEarliest}) // the value as written before creators were kept
	if err := e.store.Update(func(w *store.Writer) error {
		return w.PutGroupConfig("old", store.GroupConfig{Assignor: "sticky", Config: old})
	}); err != nil {
		t.Fatal(err)
	}
	m, snap := e.reload(t)
	creators := map[string]string{}
	for _, g := range snap.Groups {
		creators[g.Group] = g.Creator
		if g.Group == "old" && g.Config.MaxMovesPerSecond != 2 {
			t.Fatalf("old group's settings lost: %+v", g.Config)
		}
	}
	if len(creators) != 2 || creators["g"] != "jti-a" || creators["old"] != "" {
		t.Fatalf("creators after a round trip: %v", creators)
	}
	for _, g := range snap.Groups {
		if want := map[string]string{"g": "orders-svc"}[g.Group]; g.CreatorName != want {
			t.Fatalf("group %s's creator name after a round trip: %q, want %q", g.Group, g.CreatorName, want)
		}
	}
	if d, ok := m.DescribeGroup("g"); !ok || d.CreatorName != "orders-svc" {
		t.Fatalf("restored machine describes g's creator name as %q", d.CreatorName)
	}
	if n := m.GroupsCreated("jti-a"); n != 1 {
		t.Fatalf("restored machine: jti-a created %d groups, want 1", n)
	}
}

// reload reads the store back as a restart does: the snapshot and the
// machine restored from it.
func (e *env) reload(t *testing.T) (*group.Machine, group.Snapshot) {
	t.Helper()
	snap, err := e.store.Load()
	if err != nil {
		t.Fatal(err)
	}
	restored, err := driver.Load(snap)
	if err != nil {
		t.Fatal(err)
	}
	m, err := group.Restore(group.DefaultConfig(), rand.New(rand.NewPCG(3, 4)), restored.Snapshot, t0)
	if err != nil {
		t.Fatal(err)
	}
	return m, restored.Snapshot
}

// orderObserver notes, when Sending runs, which of the requests it
// watches were answered already.
type orderObserver struct {
	recorder
	got     map[group.Ref]group.Message
	watched []group.Ref
}

func (o *orderObserver) Sending(now time.Time, rd group.Ready, m *group.Machine) {
	for _, ref := range o.watched {
		_, answered := o.got[ref]
		o.events = append(o.events, fmt.Sprintf("%d answered %v", ref, answered))
	}
	o.recorder.Sending(now, rd, m)
}

// TestSyncRepliesLeaveBeforeTheObserver: a held sync poll answered in a
// Ready gets its reply after the Ready was persisted and before the
// Observer's Sending runs (the console's timeline reading a bulk revoke's
// 10,000 records held the gateways' answers back, BENCHMARKS §3); the
// Ready's other answers, which their requests may change, after it.
func TestSyncRepliesLeaveBeforeTheObserver(t *testing.T) {
	e := newEnv(t)
	obs := &orderObserver{got: e.got}
	e.d = driver.New(e.m, e.store, obs, driver.Restored{})
	join := e.submit(joinEvent)
	poll := e.submit(func(ref group.Ref) group.Event { return group.SyncPoll{Ref: ref, Gateway: "gw"} })
	if err := e.d.Flush(t0); err != nil {
		t.Fatal(err)
	}
	member := e.got[join].(group.JoinReply).MemberID
	seq := e.got[poll].(group.SyncReply).Seq
	held := e.submit(func(ref group.Ref) group.Event {
		return group.SyncPoll{Ref: ref, Gateway: "gw", After: seq, Wait: time.Second}
	})
	if err := e.d.Flush(t0); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.got[held]; ok {
		t.Fatal("the poll with nothing new was answered at once")
	}
	revoke := e.submit(func(ref group.Ref) group.Event {
		return group.RevokeMember{Ref: ref, Group: "g", MemberID: member}
	})
	obs.watched, obs.events = []group.Ref{held, revoke}, nil
	if err := e.d.Flush(t0); err != nil {
		t.Fatal(err)
	}
	if r, ok := e.got[held].(group.SyncReply); !ok || len(r.Fences) != 2 {
		t.Fatalf("held poll answered %#v, want the 2 fences", e.got[held])
	}
	want := fmt.Sprint([]string{"persisted", fmt.Sprintf("%d answered true", held), fmt.Sprintf("%d answered false", revoke), "sent 2"})
	if len(obs.events) > 0 && strings.HasPrefix(obs.events[0], "persisted ") {
		obs.events[0] = "persisted" // the revoke's records were written first
	}
	if got := fmt.Sprint(obs.events); got != want {
		t.Fatalf("observer saw %v, want %v", got, want)
	}
	if _, ok := e.got[revoke].(group.RevokeMemberReply); !ok {
		t.Fatalf("revoke answered %#v", e.got[revoke])
	}
}
