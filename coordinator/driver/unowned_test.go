package driver_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/capgate/capgate/coordinator/driver"
	"github.com/capgate/capgate/coordinator/group"
	"github.com/capgate/capgate/store"
)

// bulkPartitions spans two unowned blocks (4,096 partitions each).
const bulkPartitions = 4200

// crashable is a store the bulk tests write through, and what a
// coordinator killed -9 now would open at its restart or takeover.
type crashable struct {
	update  func(fn func(w *store.Writer) error) error
	restart func(t *testing.T) store.Backend // open (closed at cleanup)
}

// crash is what the restart loads.
func (c crashable) crash(t *testing.T) *store.Snapshot {
	t.Helper()
	snap, err := c.restart(t).Load()
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// badgerCrashable: the crash image is a copy of the live data
// directory (every Update synced it), opened as a restart opens it; it is
// the live one from then on.
func badgerCrashable(t *testing.T) crashable {
	dir := filepath.Join(t.TempDir(), "store")
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return crashable{update: st.Update, restart: func(t *testing.T) store.Backend {
		image := filepath.Join(t.TempDir(), "image")
		if err := os.CopyFS(image, os.DirFS(dir)); err != nil {
			t.Fatal(err)
		}
		dir = image // the next crash is the restarted one's
		restarted, err := store.Open(image, store.Options{})
		if err != nil {
			t.Fatalf("open the crash image: %v", err)
		}
		t.Cleanup(func() { restarted.Close() })
		return restarted
	}}
}

var kafka struct {
	once    sync.Once
	cluster *kfake.Cluster
	err     error
	topics  atomic.Int64
}

// kafkaCrashable: the Kafka log store on kfake; the crash is a takeover
// with the writer left running (as if killed): a new writer of the shard
// fences it, reads the log to its end and loads. The old writer is dead
// after that.
func kafkaCrashable(t *testing.T) crashable {
	kafka.once.Do(func() { kafka.cluster, kafka.err = kfake.NewCluster(kfake.NumBrokers(1)) })
	if kafka.err != nil {
		t.Fatalf("kfake: %v", kafka.err)
	}
	kek, err := store.NewKEK([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	topic := fmt.Sprintf("driver-state-%d", kafka.topics.Add(1))
	opts := store.KafkaOptions{
		LogOptions:            store.LogOptions{WriterID: "test", KEK: kek},
		Client:                []kgo.Opt{kgo.SeedBrokers(kafka.cluster.ListenAddrs()...)},
		Topic:                 topic,
		Shards:                1,
		ReplicationFactor:     1,
		TransactionalIDPrefix: "driver-" + topic,
	}
	open := func(t *testing.T) *store.LogStore {
		st, err := store.OpenKafka(context.Background(), opts)
		if err != nil {
			t.Fatalf("open kafka: %v", err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	st := open(t)
	return crashable{update: st.Update, restart: func(t *testing.T) store.Backend { return open(t) }}
}

// countingStore counts the records of each Update.
type countingStore struct {
	update func(fn func(w *store.Writer) error) error
	last   int
}

func (c *countingStore) Update(fn func(w *store.Writer) error) error {
	return c.update(func(w *store.Writer) error {
		err := fn(w)
		c.last = w.Records()
		return err
	})
}

// persisted keeps the latest partition record of every key the driver
// persisted: what a restore must give back.
type persisted struct {
	recorder
	parts map[string]group.PartitionRecord
}

func (p *persisted) Persisted(rd group.Ready) {
	for _, r := range rd.Persist {
		if r, ok := r.(group.PartitionRecord); ok {
			key := fmt.Sprintf("%s/%s/%d", r.Group, r.Topic, r.Partition)
			if r.Forgotten {
				delete(p.parts, key)
				continue
			}
			p.parts[key] = r
		}
	}
}

func partitionLines(records []group.PartitionRecord) []string {
	var out []string
	for _, r := range records {
		out = append(out, fmt.Sprintf("%s/%s/%d epoch %d %s holder %q@%d outside %v target %q outside %v started %d released %v forced %v",
			r.Group, r.Topic, r.Partition, r.Epoch, r.State, r.Holder, r.HolderEpoch, r.HolderOutside,
			r.Target, r.TargetOutside, unixMilli(r.RevokeStarted), r.Released, r.Forced))
	}
	slices.Sort(out)
	return out
}

func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// TestBulkCompletionIsCompactAndRestoresExactly: a member holding 4,200
// partitions is revoked while a gateway is known; its partitions go
// revoking (the fence persist), and unowned once the gateway acked (the
// completion persist), then a new member takes them under new epochs.
// The completion writes a handful of records, not one per partition
// (unowned.go), and a coordinator killed after any of the three persists
// restores exactly the partitions persisted — on badger and on the Kafka
// log; and when the group, empty after the completion, is reaped, its
// unowned blocks go with it.
func TestBulkCompletionIsCompactAndRestoresExactly(t *testing.T) {
	backends := map[string]func(*testing.T) crashable{"badger": badgerCrashable, "kafka": kafkaCrashable}
	for _, name := range []string{"badger", "kafka"} {
		for _, killAfter := range []string{"fence", "completion", "regrant", "reap"} {
			t.Run(name+"/killed after the "+killAfter, func(t *testing.T) {
				bulkRevokeKilled(t, backends[name](t), killAfter)
			})
		}
	}
}

func bulkRevokeKilled(t *testing.T, st crashable, killAfter string) {
	cfg := group.DefaultConfig()
	cfg.InitialAssignDelay = 0
	cfg.Limits.EmptyGroupTTL = 11 * time.Minute
	m, err := group.New(cfg, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	counting := &countingStore{update: st.update}
	obs := &persisted{parts: map[string]group.PartitionRecord{}}
	got := map[group.Ref]group.Message{}
	d := driver.New(m, counting, obs, driver.Restored{})
	submit := func(ev func(group.Ref) group.Event) group.Ref {
		return d.Submit(ev, func(msg group.Message) { got[msg.Request()] = msg })
	}
	flush := func() {
		t.Helper()
		if err := d.Flush(t0); err != nil {
			t.Fatal(err)
		}
	}
	d.Submit(func(group.Ref) group.Event { return group.Topics{Partitions: map[string]int32{"bulk": bulkPartitions}} }, nil)
	poll := submit(func(ref group.Ref) group.Event { return group.SyncPoll{Ref: ref, Gateway: "gw"} })
	join := submit(func(ref group.Ref) group.Event { return group.Join{Ref: ref, Group: "g", Topics: []string{"bulk"}} })
	flush()
	seq := got[poll].(group.SyncReply).Seq
	a := got[join].(group.JoinReply)
	if len(a.Grants) != bulkPartitions {
		t.Fatalf("member holds %d partitions, want %d", len(a.Grants), bulkPartitions)
	}
	held := submit(func(ref group.Ref) group.Event {
		return group.SyncPoll{Ref: ref, Gateway: "gw", After: seq, Wait: time.Second}
	})
	revoke := submit(func(ref group.Ref) group.Event {
		return group.RevokeMember{Ref: ref, Group: "g", MemberID: a.MemberID}
	})
	flush()
	if r, ok := got[revoke].(group.RevokeMemberReply); !ok || r.Fenced != bulkPartitions {
		t.Fatalf("revoke answered %#v", got[revoke])
	}
	states := countStates(obs.parts)
	if states[group.Revoking] != bulkPartitions {
		t.Fatalf("after the revoke: %v, want every partition revoking (the gateway has not acked)", states)
	}
	if killAfter == "fence" {
		restartedMatches(t, st.crash(t), obs)
		return
	}
	seq = got[held].(group.SyncReply).Seq
	submit(func(ref group.Ref) group.Event {
		return group.SyncPoll{Ref: ref, Gateway: "gw", After: seq, Wait: time.Second}
	})
	flush()
	if states := countStates(obs.parts); states[group.Unowned] != bulkPartitions {
		t.Fatalf("after the ack: %v, want every partition unowned", states)
	}
	if counting.last > 10 {
		t.Errorf("the completion of %d handoffs wrote %d records, want a handful (the unowned blocks)", bulkPartitions, counting.last)
	}
	if killAfter == "completion" {
		restartedMatches(t, st.crash(t), obs)
		return
	}
	if killAfter == "reap" {
		for i := 0; len(obs.parts) > 0; i++ {
			if i == 100 {
				t.Fatalf("the empty group was not reaped: %d partitions left", len(obs.parts))
			}
			next, ok := m.NextDeadline()
			if !ok {
				t.Fatalf("no timer armed; %d partitions left", len(obs.parts))
			}
			if err := d.Tick(next); err != nil {
				t.Fatal(err)
			}
		}
		snap := st.crash(t)
		for name := range snap.Meta {
			if strings.HasPrefix(name, "coordinator.unowned/") {
				t.Errorf("%s left in the store after its group was reaped", name)
			}
		}
		restartedMatches(t, snap, obs)
		return
	}
	b := submit(func(ref group.Ref) group.Event { return group.Join{Ref: ref, Group: "g", Topics: []string{"bulk"}} })
	flush()
	if r := got[b].(group.JoinReply); len(r.Grants) != bulkPartitions {
		t.Fatalf("new member granted %d partitions, want %d", len(r.Grants), bulkPartitions)
	}
	if states := countStates(obs.parts); states[group.Owned] != bulkPartitions {
		t.Fatalf("after the new join: %v, want every partition owned", states)
	}
	restartedMatches(t, st.crash(t), obs)
}

func countStates(parts map[string]group.PartitionRecord) map[group.PartitionState]int {
	n := map[group.PartitionState]int{}
	for _, r := range parts {
		n[r.State]++
	}
	return n
}

// restartedMatches checks that what a restart loads from snap is every
// partition record persisted, exactly, and that a machine restores from it.
func restartedMatches(t *testing.T, snap *store.Snapshot, obs *persisted) driver.Restored {
	t.Helper()
	restored, err := driver.Load(snap)
	if err != nil {
		t.Fatalf("load after the kill: %v", err)
	}
	var want []group.PartitionRecord
	for _, r := range obs.parts {
		want = append(want, r)
	}
	gotLines, wantLines := partitionLines(restored.Snapshot.Partitions), partitionLines(want)
	if len(gotLines) != len(wantLines) {
		t.Fatalf("restored %d partitions, persisted %d", len(gotLines), len(wantLines))
	}
	for i := range gotLines {
		if gotLines[i] != wantLines[i] {
			t.Fatalf("partition restored as\n  %s\npersisted as\n  %s", gotLines[i], wantLines[i])
		}
	}
	if _, err := group.Restore(group.DefaultConfig(), rand.New(rand.NewPCG(3, 4)), restored.Snapshot, t0); err != nil {
		t.Fatalf("restore: %v", err)
	}
	return restored
}
