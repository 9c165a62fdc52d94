package broker

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// nativeGroupCommits runs a native kgo consumer in group on topic until it
// has read the n records there, commits them and leaves (Close): what an
// application that was redeployed or a finished batch job leaves behind.
func nativeGroupCommits(t *testing.T, e *Embedded, group, topic string, n int, opts ...kgo.GroupOpt) {
	t.Helper()
	all := append([]kgo.Opt{kgo.SeedBrokers(e.Addrs()...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, toOpts(opts)...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for read := 0; read < n; {
		fetches := cl.PollFetches(testCtx(t))
		if err := fetches.Err(); err != nil {
			t.Fatalf("native consumer: %v", err)
		}
		read += fetches.NumRecords()
	}
	if err := cl.CommitUncommittedOffsets(testCtx(t)); err != nil {
		t.Fatalf("native commit: %v", err)
	}
}

func toOpts(group []kgo.GroupOpt) []kgo.Opt {
	out := make([]kgo.Opt, len(group))
	for i, o := range group {
		out[i] = o
	}
	return out
}

// TestGroupOwner: GroupOwner tells a group capgate's marker wrote from a
// native Kafka group (classic or KIP-848, empty: its members left), from
// simple commits without the marker, and from another writer's marker.
func TestGroupOwner(t *testing.T) {
	e := startEmbedded(t, EmbeddedConfig{Topics: map[string]int32{"a": 2}})
	c := newTestClient(t, e, nil)
	produce(t, c, "a", 0, makeRecords(0, 3))
	produce(t, c, "a", 1, makeRecords(3, 2))
	const mine, theirs = "capgate-mirror mine", "capgate-mirror theirs"
	offsets := map[string]map[int32]int64{"a": {0: 1, 1: 2}}

	owner := func(group string) GroupOwner {
		t.Helper()
		o, err := c.GroupOwner(testCtx(t), group, mine)
		if err != nil {
			t.Fatalf("GroupOwner(%s): %v", group, err)
		}
		return o
	}
	if o := owner("nothing-here"); !o.Owned() || o.Offsets != 0 {
		t.Fatalf("a name Kafka does not know: %+v, want owned", o)
	}
	if err := c.CommitMarkedGroupOffsets(testCtx(t), "capgate-made", mine, offsets); err != nil {
		t.Fatal(err)
	}
	if o := owner("capgate-made"); !o.Owned() || o.Offsets != 2 {
		t.Fatalf("a group of our marked commits: %+v, want owned with 2 offsets", o)
	}
	got, err := kadm.NewClient(c.kgo).FetchOffsets(testCtx(t), "capgate-made")
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := got.Lookup("a", 1); r.At != 2 || r.Metadata != mine {
		t.Fatalf("kadm reads a[1] = %d %q, want 2 %q", r.At, r.Metadata, mine)
	}

	if err := c.CommitMarkedGroupOffsets(testCtx(t), "other-deployment", theirs, offsets); err != nil {
		t.Fatal(err)
	}
	if o := owner("other-deployment"); o.Owned() || o.Foreign != 2 || !strings.Contains(o.Reason(), theirs) {
		t.Fatalf("another deployment's group: %+v (%s), want 2 foreign offsets naming its marker", o, o.Reason())
	}
	if err := c.CommitMarkedGroupOffsets(testCtx(t), "simple", "", offsets); err != nil {
		t.Fatal(err)
	}
	if o := owner("simple"); o.Owned() || o.Native != "" || o.Foreign != 2 {
		t.Fatalf("simple commits without the marker (an app without group management, an older capgate): %+v, want 2 foreign offsets", o)
	}

	nativeGroupCommits(t, e, "native-classic", "a", 5)
	if o := owner("native-classic"); o.Owned() || !strings.Contains(o.Native, `protocol type "consumer"`) || o.Foreign != 2 {
		t.Fatalf("an empty classic group: %+v, want native with 2 foreign offsets", o)
	}
	nativeGroupCommits(t, e, "native-848", "a", 5, kgo.ServerSideBalancer())
	if o := owner("native-848"); o.Owned() || !strings.Contains(o.Native, "KIP-848") {
		t.Fatalf("an empty KIP-848 group: %+v, want native", o)
	}
}

// TestCommitMarkedGroupOffsetsRefusedWhileNativeMembersLive: Kafka itself
// refuses the mirror's simple commit while a native group has a member —
// what is left of the race between GroupOwner and the write.
func TestCommitMarkedGroupOffsetsRefusedWhileNativeMembersLive(t *testing.T) {
	e := startEmbedded(t, EmbeddedConfig{Topics: map[string]int32{"a": 1}})
	c := newTestClient(t, e, nil)
	produce(t, c, "a", 0, makeRecords(0, 1))
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.Addrs()...), kgo.ConsumerGroup("live"), kgo.ConsumeTopics("a"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if fetches := cl.PollFetches(testCtx(t)); fetches.Err() != nil || fetches.NumRecords() == 0 {
		t.Fatalf("native member: %v", fetches.Err())
	}
	if o, err := c.GroupOwner(testCtx(t), "live", "m"); err != nil || o.Owned() {
		t.Fatalf("a live native group: %+v, %v; want not owned", o, err)
	}
	if err := c.CommitMarkedGroupOffsets(testCtx(t), "live", "m", map[string]map[int32]int64{"a": {0: 0}}); err == nil {
		t.Fatal("a simple commit into a live native group was accepted")
	}
}
