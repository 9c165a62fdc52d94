package coordinator_test

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap/zapcore"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// waitMirrored waits until Kafka group kafkaGroup holds exactly offset,
// marked as this deployment's, on each of the partitions of topic.
func waitMirrored(t *testing.T, e *env, kafkaGroup, topic string, partitions int32, offset int64) {
	t.Helper()
	marker := coordinator.MirrorMarker(e.cfg.ID, e.cfg.Cluster)
	want := make(map[string]string)
	for p := range partitions {
		want[fmt.Sprintf("%s/%d", topic, p)] = fmt.Sprintf("%d %q", offset, marker)
	}
	eventually(t, func() string {
		if got := kafkaOffsets(t, e, kafkaGroup); !maps.Equal(got, want) {
			return fmt.Sprintf("Kafka group %s: %v, want %v", kafkaGroup, got, want)
		}
		return ""
	})
}

// nativeReadsFromStart starts a native kgo consumer in group, straight on
// Kafka with auto.offset.reset=earliest (kcat -G group -X
// auto.offset.reset=earliest), and fails unless it reads every record of
// topic from offset 0: n per partition. A consumer resuming from offsets
// someone else committed reads fewer, or nothing; the deadline bounds
// that failure only.
func nativeReadsFromStart(t *testing.T, e *env, group, topic string, partitions int32, n int64) {
	t.Helper()
	cl := nativeConsumer(t, e, group, topic)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	read := make(map[int32][]int64)
	for total := int64(0); total < int64(partitions)*n; {
		fetches := cl.PollFetches(ctx)
		if err := fetches.Err(); err != nil {
			t.Fatalf("native consumer of %s read %d of %d records (%v): %v", group, total, int64(partitions)*n, read, err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			read[r.Partition] = append(read[r.Partition], r.Offset)
			total++
		})
	}
	for p := range partitions {
		if got := read[p]; int64(len(got)) != n || got[0] != 0 {
			t.Fatalf("native consumer of %s read offsets %v of %s/%d, want 0..%d", group, got, topic, p, n-1)
		}
	}
}

// TestMirrorCannotSquatANativeGroupName is redteam7 #5. With
// mirror_offsets: true and nothing else set, a tenant joins capgate group
// billing — a name no native group holds yet (the native app has not
// started, or Kafka expired its offsets: the ownership check sees a free
// name) — and commits the end of every partition. The mirror wrote
// Kafka's group billing, and the native app starting later with
// auto.offset.reset=earliest resumed there and read nothing. Now the
// mirror writes capgate.billing (the default prefix); Kafka's billing
// holds nothing and the native app reads every record.
func TestMirrorCannotSquatANativeGroupName(t *testing.T) {
	e := newEnv(t, map[string]int32{"demo": 4})
	e.cfg.MirrorOffsets = true
	e.fill(t, 2)
	h := e.start(t)
	creds := h.clientCredential(t, []string{"billing"}, []string{"demo"})
	m := h.join(t, "billing", creds, api.JoinRequest{Topics: []string{"demo"}})
	commitEach(t, m, 2) // the high watermark of every partition
	waitMirrored(t, e, e.cfg.MirrorOffsetsPrefix+"billing", "demo", 4, 2)
	if got := kafkaOffsets(t, e, "billing"); len(got) != 0 {
		t.Fatalf("the tenant's commits are in Kafka group billing, the native app's name: %v", got)
	}
	nativeReadsFromStart(t, e, "billing", "demo", 4, 2)
}

// TestMirrorUpgradeLeavesUnprefixedGroupsAndSaysSo: a deployment that
// mirrored without a prefix (an older capgate) upgrades and takes the
// default prefix. Its offsets go to capgate.<group> from then on; the
// Kafka group of the bare name keeps what was mirrored there (capgate
// never deletes a Kafka group), and one WARN per group names it, since a
// native app starting under that name would resume from it. A bare name
// holding another writer's offsets is not reported.
func TestMirrorUpgradeLeavesUnprefixedGroupsAndSaysSo(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	e.cfg.MirrorOffsets = true // the default prefix
	e.fill(t, 10)
	adm := kadm.NewClient(kafkaAdmin(t, e))
	before := map[string]string{ // what Kafka holds under the bare names
		"billing": coordinator.MirrorMarker(e.cfg.ID, e.cfg.Cluster), // the older, unprefixed mirror's
		"search":  "kgo-native",                                      // a native app's
	}
	for group, metadata := range before {
		var os kadm.Offsets
		os.Add(kadm.Offset{Topic: "orders", Partition: 0, At: 3, LeaderEpoch: -1, Metadata: metadata})
		if err := adm.CommitAllOffsets(t.Context(), group, os); err != nil {
			t.Fatalf("commit %s: %v", group, err)
		}
	}
	h := e.start(t)
	creds := h.clientCredential(t, []string{"*"}, []string{"orders"})
	for group, metadata := range before {
		m := h.join(t, group, creds, api.JoinRequest{Topics: []string{"orders"}})
		for _, offset := range []int64{5, 6} { // the second round does not look again
			commitEach(t, m, offset)
			waitMirrored(t, e, "capgate."+group, "orders", 1, offset)
		}
		if got := kafkaOffsets(t, e, group)["orders/0"]; got != fmt.Sprintf("3 %q", metadata) {
			t.Fatalf("Kafka group %s: %v, want the 3 committed before the upgrade", group, got)
		}
	}
	left := e.logs.FilterMessageSnippet("holds offsets this deployment mirrored before mirror_offsets_prefix applied").All()
	if len(left) != 1 || left[0].Level != zapcore.WarnLevel || left[0].ContextMap()["kafka_group"] != "billing" ||
		left[0].ContextMap()["mirrored_to"] != "capgate.billing" {
		t.Fatalf("leftover warnings: %v, want one WARN naming billing", left)
	}
}
