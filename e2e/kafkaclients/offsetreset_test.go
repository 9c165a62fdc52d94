package kafkaclients

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/capgate/capgate/e2e/sdk"
)

// offsetResetOld is how many records each partition holds before a
// consumer of these tests joins.
const offsetResetOld = 5

// pollUntil polls cl until every partition of s's topic delivered at
// least n records (or fails the test after 30 s) and returns the polled
// offsets per partition.
func pollUntil(t testing.TB, s *Stack, cl *kgo.Client, n int) map[int32][]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := map[int32][]int64{}
	enough := func() bool {
		for p := range s.Partitions {
			if len(got[p]) < n {
				return false
			}
		}
		return true
	}
	for !enough() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("polled %v, want %d records of each partition: %v", got, n, fs.Errors())
		}
		fs.EachRecord(func(r *kgo.Record) { got[r.Partition] = append(got[r.Partition], r.Offset) })
	}
	return got
}

// groupClient is a kgo KIP-848 member (client.id name) of group through
// the listener with a credential of its own and its reset policy,
// committing nothing by itself.
func groupClient(t testing.TB, s *Stack, group, name string, reset kgo.Offset) *kgo.Client {
	t.Helper()
	return kgoClient(t, s.KafkaAddrs(), s.ClientCredential(t, group), false, kgo.ClientID(name), kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(s.Topic), kgo.ConsumeResetOffset(reset), kgo.DisableAutoCommit(), kgo.ServerSideBalancer(),
		kgo.FetchMaxWait(200*time.Millisecond))
}

// emptied waits until group has no member and no partition held, and
// returns its committed offsets (partition → offset; absent: none).
func emptied(t testing.TB, s *Stack, group string) map[int32]int64 {
	t.Helper()
	committed := map[int32]int64{}
	sdk.Eventually(t, 20*time.Second, group+": no member, nothing held", func() (bool, string) {
		d := s.Describe(t, group)
		clear(committed)
		for _, p := range d.Partitions {
			if p.State != "unowned" {
				return false, fmt.Sprintf("partition %d %s", p.Partition, p.State)
			}
			if p.Committed != nil {
				committed[p.Partition] = *p.Committed
			}
		}
		return len(d.Members) == 0, fmt.Sprintf("%d members", len(d.Members))
	})
	return committed
}

// TestKgoNewGroupAppliesItsResetPolicy: through the listener, a kgo
// consumer of a new group starts where ITS ConsumeResetOffset says, as
// with Kafka — OffsetFetch answers -1 where nothing was committed (before,
// the capgate group's offset_reset position, 0: a consumer AtEnd read the
// whole topic). AtEnd reads only records produced after it joined; one
// that leaves without committing leaves nothing committed (before, its
// release committed the reset position, 0, which admin views and Kafka
// tools then showed); AtStart reads from 0; and a committed offset still
// wins over the client's policy (a member of a group whose partitions
// were committed starts there, AtEnd or not).
func TestKgoNewGroupAppliesItsResetPolicy(t *testing.T) {
	s := Start(t, Options{Partitions: 2})
	for p := range s.Partitions {
		produceDirect(t, s, s.Topic, p, offsetResetOld)
	}
	producing := startProducer(t, s, 20*time.Millisecond)

	late := groupClient(t, s, "at-end", "at-end", kgo.NewOffset().AtEnd())
	for p, offs := range pollUntil(t, s, late, 3) {
		if offs[0] < offsetResetOld {
			t.Errorf("AtEnd member of a new group read partition %d from %d (polled %v): records from before it joined", p, offs[0], offs)
		}
	}
	late.Close() // leaves without committing
	if committed := emptied(t, s, "at-end"); len(committed) > 0 {
		t.Errorf("a member that committed nothing left committed offsets %v", committed)
	}

	early := groupClient(t, s, "at-start", "at-start", kgo.NewOffset().AtStart())
	for p, offs := range pollUntil(t, s, early, offsetResetOld) {
		if offs[0] != 0 {
			t.Errorf("AtStart member of a new group read partition %d from %d, want 0", p, offs[0])
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := early.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	early.Close()
	producing.Stop()
	committed := emptied(t, s, "at-start")
	if len(committed) != int(s.Partitions) {
		t.Fatalf("committed %v, want every partition", committed)
	}
	for p := range s.Partitions {
		produceDirect(t, s, s.Topic, p, 2) // beyond the committed offsets
	}
	// The same group, now AtEnd: the committed offsets are where it starts.
	next := groupClient(t, s, "at-start", "at-start-next", kgo.NewOffset().AtEnd())
	for p, offs := range pollUntil(t, s, next, 2) {
		if offs[0] != committed[p] {
			t.Errorf("AtEnd member of a group with committed offsets read partition %d from %d, want the committed %d", p, offs[0], committed[p])
		}
	}
}

// TestKcatAutoOffsetResetLatest: kcat (librdkafka, the classic protocol)
// with auto.offset.reset=latest in a new group reads only what is
// produced after it joined, as against Kafka (before: every record from
// offset 0, the capgate group's offset_reset).
func TestKcatAutoOffsetResetLatest(t *testing.T) {
	s := Start(t, Options{Partitions: 2})
	for p := range s.Partitions {
		produceDirect(t, s, s.Topic, p, offsetResetOld)
	}
	k := startKcat(t, s, s.ClientCredential(t, "kcat-latest"), "-G", "kcat-latest", "-X", "auto.offset.reset=latest",
		"-u", "-f", "%p/%o\\n", s.Topic)
	startProducer(t, s, 20*time.Millisecond)
	read := map[int32][]int64{}
	sdk.Eventually(t, 30*time.Second, "kcat read new records of every partition", func() (bool, string) {
		clear(read)
		for _, line := range strings.Split(k.output(), "\n") {
			p, o, ok := strings.Cut(line, "/")
			pn, err1 := strconv.Atoi(p)
			on, err2 := strconv.ParseInt(o, 10, 64)
			if ok && err1 == nil && err2 == nil {
				read[int32(pn)] = append(read[int32(pn)], on)
			}
		}
		return len(read[0]) >= 3 && len(read[1]) >= 3, fmt.Sprintf("read %v", read)
	})
	for p, offs := range read {
		if slices.Min(offs) < offsetResetOld {
			t.Errorf("kcat auto.offset.reset=latest read partition %d from %d (read %v): records from before it joined", p, slices.Min(offs), offs)
		}
	}
}
