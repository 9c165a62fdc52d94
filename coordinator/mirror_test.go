package coordinator_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap/zapcore"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// mirrorUnprefixed configures the mirror to write each group under its
// own name (mirror_offsets_prefix "" and mirror_offsets_unprefixed, the
// opt-out): the ownership check is then all that keeps it out of native
// groups, and these tests exercise it.
func mirrorUnprefixed(e *env) {
	e.cfg.MirrorOffsets = true
	e.cfg.MirrorOffsetsPrefix = ""
	e.cfg.MirrorOffsetsUnprefixed = true
}

// nativeConsumer is a native kgo consumer of topic in Kafka group group,
// straight on Kafka, committing only when told, starting at the earliest
// offset where the group has none (auto.offset.reset=earliest).
func nativeConsumer(t *testing.T, e *env, group, topic string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.kafka.Addrs()...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// nativeGroupCommits runs a native kgo consumer in group on every
// partition of topic until it has read n records, commits them and
// leaves: an application being redeployed, or a finished batch job.
func nativeGroupCommits(t *testing.T, e *env, group, topic string, n int) {
	t.Helper()
	cl := nativeConsumer(t, e, group, topic)
	defer cl.Close()
	for read := 0; read < n; {
		fetches := cl.PollFetches(t.Context())
		if err := fetches.Err(); err != nil {
			t.Fatalf("native consumer: %v", err)
		}
		read += fetches.NumRecords()
	}
	if err := cl.CommitUncommittedOffsets(t.Context()); err != nil {
		t.Fatalf("native commit: %v", err)
	}
}

// kafkaOffsets reads group's committed offsets and their metadata from
// Kafka itself (kadm, as kafka-consumer-groups reads them).
func kafkaOffsets(t *testing.T, e *env, group string) map[string]string {
	t.Helper()
	got, err := kadm.NewClient(kafkaAdmin(t, e)).FetchOffsets(t.Context(), group)
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		t.Fatalf("fetch offsets of %s: %v", group, err)
	}
	out := make(map[string]string)
	got.Each(func(o kadm.OffsetResponse) {
		out[fmt.Sprintf("%s/%d", o.Topic, o.Partition)] = fmt.Sprintf("%d %q", o.At, o.Metadata)
	})
	return out
}

// commitEach commits offset on every partition m was granted.
func commitEach(t *testing.T, m *member, offset int64) {
	t.Helper()
	m.mu.Lock()
	grants := slices.Collect(maps.Values(m.grants))
	m.mu.Unlock()
	if len(grants) == 0 {
		t.Fatal("member holds nothing to commit")
	}
	for _, g := range grants {
		if status, b := m.commit(t, g.Topic, g.Partition, offset, false); status != 200 {
			t.Fatalf("commit %s/%d: %d %s", g.Topic, g.Partition, status, b)
		}
	}
}

// waitRefused waits until the mirror refused kafkaGroup, failing at once
// if Kafka's offsets of it move from before.
func waitRefused(t *testing.T, e *env, kafkaGroup string, before map[string]string) {
	t.Helper()
	eventually(t, func() string {
		if now := kafkaOffsets(t, e, kafkaGroup); !maps.Equal(now, before) {
			t.Fatalf("capgate rewrote Kafka group %s: %v, was %v", kafkaGroup, now, before)
		}
		refused := e.logs.FilterMessageSnippet("refused, the kafka group is not this deployment's").
			FilterField(zapcore.Field{Key: "kafka_group", Type: zapcore.StringType, String: kafkaGroup}).All()
		if len(refused) != 1 || refused[0].Level != zapcore.WarnLevel {
			return fmt.Sprintf("refusals of %s logged: %v", kafkaGroup, refused)
		}
		return ""
	})
}

// TestMirrorLeavesANativeGroupAlone is redteam5 #2: a tenant whose group
// pattern covers the name of a native Kafka consumer group, momentarily
// empty, joins that name at capgate and commits; with mirror_offsets the
// native group's offsets were rewound. Now they stay, the refusal is
// logged once and counted, and capgate serves the group as ever.
func TestMirrorLeavesANativeGroupAlone(t *testing.T) {
	e := newEnv(t, map[string]int32{"demo": 3})
	mirrorUnprefixed(e)
	e.fill(t, 10)
	nativeGroupCommits(t, e, "native-b", "demo", 30)
	before := kafkaOffsets(t, e, "native-b")
	if len(before) != 3 {
		t.Fatalf("native offsets: %v", before)
	}
	h := e.start(t)
	creds := h.clientCredential(t, []string{"n*"}, []string{"demo"})
	m := h.join(t, "native-b", creds, api.JoinRequest{Topics: []string{"demo"}})
	commitEach(t, m, 1) // the native app had read to 10: rewound
	waitRefused(t, e, "native-b", before)
	commitEach(t, m, 2) // a second round: refused from the cache, not logged again
	status, body, _ := h.do(t, "GET", "/metrics", "", nil)
	if got, ok := metricValue(body, "capgate_coordinator_mirror_groups_refused"); status != 200 || !ok || got != 1 {
		t.Fatalf("capgate_coordinator_mirror_groups_refused = %v (%v), want 1", got, ok)
	}
	eventually(t, func() string {
		_, body, _ := h.do(t, "GET", "/metrics", "", nil)
		if got, _ := metricValue(body, "capgate_coordinator_mirror_refusals_total"); got < 2 {
			return fmt.Sprintf("refusals counted: %v, want 2 rounds", got)
		}
		return ""
	})
	waitRefused(t, e, "native-b", before)
	for _, p := range h.describe(t, "native-b").Partitions {
		if p.Committed == nil || *p.Committed != 2 {
			t.Fatalf("capgate's own offset of %s/%d: %v, want 2", p.Topic, p.Partition, p.Committed)
		}
	}
}

// TestMirrorRefusesGroupsOthersWrote: offsets another capgate deployment
// mirrored (its marker), or an application without group management
// committed (no protocol type, no marker), are not this deployment's.
func TestMirrorRefusesGroupsOthersWrote(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 2})
	mirrorUnprefixed(e)
	e.fill(t, 10)
	adm := kadm.NewClient(kafkaAdmin(t, e))
	others := map[string]string{
		"staging":    coordinator.MirrorMarker("capgate-staging", e.cfg.Cluster),
		"other-pool": coordinator.MirrorMarker(e.cfg.ID, "other-pool"),
		"simple-app": "",
	}
	for group, marker := range others {
		var os kadm.Offsets
		os.Add(kadm.Offset{Topic: "orders", Partition: 0, At: 7, LeaderEpoch: -1, Metadata: marker})
		os.Add(kadm.Offset{Topic: "orders", Partition: 1, At: 7, LeaderEpoch: -1, Metadata: marker})
		if err := adm.CommitAllOffsets(t.Context(), group, os); err != nil {
			t.Fatalf("commit %s: %v", group, err)
		}
	}
	h := e.start(t)
	creds := h.clientCredential(t, []string{"*"}, []string{"orders"})
	for group := range others {
		before := kafkaOffsets(t, e, group)
		m := h.join(t, group, creds, api.JoinRequest{Topics: []string{"orders"}})
		commitEach(t, m, 3)
		waitRefused(t, e, group, before)
	}
}

// TestMirrorWritesTheGroupsItOwns: a group capgate created in Kafka is
// mirrored on every commit, each offset marked as this deployment's
// (kadm reads the marker back); with mirror_offsets_prefix the Kafka
// group is the prefixed name and the bare name is never written.
func TestMirrorWritesTheGroupsItOwns(t *testing.T) {
	for _, prefix := range []string{"", "capgate."} {
		t.Run("prefix="+prefix, func(t *testing.T) {
			e := newEnv(t, map[string]int32{"orders": 1})
			e.cfg.MirrorOffsets = true
			e.cfg.MirrorOffsetsPrefix = prefix
			e.cfg.MirrorOffsetsUnprefixed = prefix == ""
			e.fill(t, 10)
			h := e.start(t)
			creds := h.clientCredential(t, []string{"g"}, []string{"orders"})
			m := h.join(t, "g", creds, api.JoinRequest{Topics: []string{"orders"}})
			marker := coordinator.MirrorMarker(e.cfg.ID, e.cfg.Cluster)
			for _, offset := range []int64{2, 5} { // the first round checks, the second uses the decision
				commitEach(t, m, offset)
				want := map[string]string{"orders/0": fmt.Sprintf("%d %q", offset, marker)}
				eventually(t, func() string {
					if got := kafkaOffsets(t, e, prefix+"g"); !maps.Equal(got, want) {
						return fmt.Sprintf("Kafka group %s: %v, want %v", prefix+"g", got, want)
					}
					return ""
				})
			}
			if prefix != "" {
				if got := kafkaOffsets(t, e, "g"); len(got) != 0 {
					t.Fatalf("the bare name was written: %v", got)
				}
			}
			if refused := e.logs.FilterMessageSnippet("refused").All(); len(refused) != 0 {
				t.Fatalf("refusals logged: %v", refused)
			}
		})
	}
}

// TestMirrorStopsWhenANativeAppTakesTheName: the race left after the
// check. A native app joins a Kafka group capgate already mirrors: Kafka
// refuses capgate's simple commit while the app is a member, and that
// failure drops the cached decision, so the next round asks Kafka again
// and refuses the group — the app's own offsets, committed as it leaves,
// are never overwritten.
func TestMirrorStopsWhenANativeAppTakesTheName(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	mirrorUnprefixed(e)
	e.fill(t, 10)
	h := e.start(t)
	creds := h.clientCredential(t, []string{"g"}, []string{"orders"})
	m := h.join(t, "g", creds, api.JoinRequest{Topics: []string{"orders"}})
	commitEach(t, m, 2)
	eventually(t, func() string {
		if got := kafkaOffsets(t, e, "g")["orders/0"]; got == "" || got[0] != '2' {
			return "not mirrored yet: " + got
		}
		return ""
	})

	native := nativeConsumer(t, e, "g", "orders")
	defer native.Close()
	for read := 0; read < 8; { // it starts at capgate's 2 and reads to 10
		fetches := native.PollFetches(t.Context())
		if err := fetches.Err(); err != nil {
			t.Fatalf("native consumer: %v", err)
		}
		read += fetches.NumRecords()
	}
	commitEach(t, m, 3) // Kafka refuses it: the group has a member
	eventually(t, func() string {
		failed := e.logs.FilterMessage("mirror offsets to kafka").
			FilterField(zapcore.Field{Key: "kafka_group", Type: zapcore.StringType, String: "g"}).All()
		if len(failed) == 0 {
			return "no failed mirror write logged"
		}
		return ""
	})
	if err := native.CommitUncommittedOffsets(t.Context()); err != nil {
		t.Fatalf("native commit: %v", err)
	}
	native.Close() // leaves: the group is empty again
	before := kafkaOffsets(t, e, "g")
	if len(before) != 1 || before["orders/0"][:2] != "10" {
		t.Fatalf("native offsets: %v", before)
	}
	commitEach(t, m, 4)
	waitRefused(t, e, "g", before)
}

// TestMirrorOffsetsPrefixValidated: the prefix is empty or a name; an
// empty one with mirror_offsets needs mirror_offsets_unprefixed, which
// needs it empty. Each refusal names the setting and the fix.
func TestMirrorOffsetsPrefixValidated(t *testing.T) {
	if got := coordinator.DefaultConfig().MirrorOffsetsPrefix; got != "capgate." {
		t.Fatalf("default mirror_offsets_prefix %q, want capgate.", got)
	}
	cases := []struct {
		mirror     bool
		prefix     string
		unprefixed bool
		want       string // "" loads
	}{
		{true, "capgate.", false, ""},
		{true, "prod-", false, ""},
		{true, "", true, ""},
		{false, "", false, ""}, // no mirror: nothing is written
		{false, "", true, ""},
		{true, "", false, `mirror_offsets_prefix: empty with mirror_offsets: true would write each group's offsets under its own name in Kafka, ` +
			`where a tenant can take a native consumer group's name before the native app first commits (or after Kafka expired its offsets) ` +
			`and choose where it starts: set mirror_offsets_prefix (default "capgate."), or set mirror_offsets_unprefixed: true to accept that`},
		{true, "capgate.", true, `mirror_offsets_unprefixed: true mirrors each group under its own name, but mirror_offsets_prefix is "capgate.": ` +
			`set mirror_offsets_prefix: "" as well, or remove mirror_offsets_unprefixed to write "capgate." + group`},
		{false, "x.", true, `mirror_offsets_unprefixed: true mirrors each group under its own name, but mirror_offsets_prefix is "x."`},
		{true, "a b", false, "mirror_offsets_prefix: must be empty or 1 to 255 printable ASCII"},
		{false, "x/", false, "mirror_offsets_prefix: must be empty or"},
		{true, "\x1b[2J", false, "mirror_offsets_prefix: must be empty or"},
	}
	for _, c := range cases {
		cfg := coordinator.DefaultConfig()
		cfg.MirrorOffsets, cfg.MirrorOffsetsPrefix, cfg.MirrorOffsetsUnprefixed = c.mirror, c.prefix, c.unprefixed
		err := cfg.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("mirror %v, prefix %q, unprefixed %v: %v, want it valid", c.mirror, c.prefix, c.unprefixed, err)
		case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), c.want)):
			t.Errorf("mirror %v, prefix %q, unprefixed %v:\n got  %v\n want %s", c.mirror, c.prefix, c.unprefixed, err, c.want)
		}
	}
}
