package broker

import (
	"errors"
	"maps"
	"net"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestProduceAppendsInOrder(t *testing.T) {
	e := startEmbedded(t, EmbeddedConfig{Topics: map[string]int32{"t": 3}})
	c := newTestClient(t, e, nil)
	for i, want := range []int64{0, 4, 8} {
		recs := makeRecords(i*4, 4)
		if base := produce(t, c, "t", 2, recs); base != want {
			t.Fatalf("batch %d: base offset %d, want %d", i, base, want)
		}
		for j, r := range recs {
			if r.Offset != want+int64(j) || r.Topic != "t" || r.Partition != 2 {
				t.Fatalf("record %d: %s[%d]@%d", j, r.Topic, r.Partition, r.Offset)
			}
		}
	}
	if _, latest, err := c.Offsets(testCtx(t), "t", 2); err != nil || latest != 12 {
		t.Fatalf("latest = %d, %v; want 12", latest, err)
	}
}

func TestProduceRefusesUnknownTopicOrPartitionAndEmptyBatch(t *testing.T) {
	e := startEmbedded(t, EmbeddedConfig{Topics: map[string]int32{"t": 1}})
	c := newTestClient(t, e, nil)
	for _, tp := range []struct {
		topic     string
		partition int32
	}{{"nope", 0}, {"t", 1}, {"t", -1}} {
		_, err := c.Produce(testCtx(t), tp.topic, tp.partition, makeRecords(0, 1))
		var be *BrokerError
		if !errors.Is(err, ErrUnknownTopicOrPartition) || !errors.As(err, &be) || be.Op != "produce" {
			t.Fatalf("%s[%d]: got %v, want produce ErrUnknownTopicOrPartition", tp.topic, tp.partition, err)
		}
	}
	if _, err := c.Produce(testCtx(t), "t", 0, nil); !errors.Is(err, ErrNoRecords) {
		t.Fatalf("empty produce: %v", err)
	}
}

func TestTopicsAndPartitionCount(t *testing.T) {
	topics := map[string]int32{"a": 1, "b": 4, "c": 7}
	e := startEmbedded(t, EmbeddedConfig{Topics: topics})
	c := newTestClient(t, e, nil)
	// A group commit creates the internal __consumer_offsets topic.
	if err := c.CommitMarkedGroupOffsets(testCtx(t), "g", "", map[string]map[int32]int64{"a": {0: 0}}); err != nil {
		t.Fatal(err)
	}
	got, err := c.Topics(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, topics) {
		t.Fatalf("Topics = %v, want %v", got, topics)
	}
	for topic, want := range topics {
		if n, err := c.PartitionCount(testCtx(t), topic); err != nil || n != want {
			t.Fatalf("PartitionCount(%s) = %d, %v; want %d", topic, n, err, want)
		}
	}
	if _, err := c.PartitionCount(testCtx(t), "nope"); !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatalf("PartitionCount(nope): %v", err)
	}
}

func TestPartitionCountSeesNewPartitionsAfterMaxAge(t *testing.T) {
	e := startEmbedded(t, EmbeddedConfig{Topics: map[string]int32{"t": 2}})
	c := newTestClient(t, e, func(cfg *Config) { cfg.MetadataMaxAge = time.Nanosecond })
	if n, err := c.PartitionCount(testCtx(t), "t"); err != nil || n != 2 {
		t.Fatalf("PartitionCount = %d, %v", n, err)
	}
	req := kmsg.NewPtrCreatePartitionsRequest()
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = "t", 5
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 5000
	resp, err := req.RequestWith(testCtx(t), c.kgo)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		t.Fatal(err)
	}
	// kfake has created them when CreatePartitions answers; the cached
	// count is older than MetadataMaxAge, so this asks again.
	if n, err := c.PartitionCount(testCtx(t), "t"); err != nil || n != 5 {
		t.Fatalf("PartitionCount = %d, %v; want 5", n, err)
	}
	// The new partition can be written and read at once.
	produce(t, c, "t", 4, makeRecords(0, 1))
	if res, err := c.Fetch(testCtx(t), FetchRequest{Topic: "t", Partition: 4}); err != nil || len(res.Records) != 1 {
		t.Fatalf("fetch new partition: %d records, %v", len(res.Records), err)
	}
}

func TestCommitGroupOffsetsVisibleToKafka(t *testing.T) {
	e := startEmbedded(t, EmbeddedConfig{Topics: map[string]int32{"a": 2, "b": 1}})
	c := newTestClient(t, e, nil)
	want := map[string]map[int32]int64{"a": {0: 5, 1: 7}, "b": {0: 11}}
	if err := c.CommitMarkedGroupOffsets(testCtx(t), "capgate-g", "", want); err != nil {
		t.Fatal(err)
	}
	want["a"][0] = 6 // a second commit moves the offset
	if err := c.CommitMarkedGroupOffsets(testCtx(t), "capgate-g", "", map[string]map[int32]int64{"a": {0: 6}}); err != nil {
		t.Fatal(err)
	}
	if got := fetchGroupOffsets(t, c.kgo, "capgate-g"); !equalOffsets(got, want) {
		t.Fatalf("group offsets = %v, want %v", got, want)
	}

	err := c.CommitMarkedGroupOffsets(testCtx(t), "capgate-g", "", map[string]map[int32]int64{"nope": {0: 1}})
	if !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatalf("commit to unknown topic: %v", err)
	}
	if err := c.CommitMarkedGroupOffsets(testCtx(t), "", "", want); err == nil {
		t.Fatal("commit without a group succeeded")
	}
}

// fetchGroupOffsets reads group's committed offsets with a plain
// OffsetFetch, as kafka-consumer-groups would.
func fetchGroupOffsets(t *testing.T, cl *kgo.Client, group string) map[string]map[int32]int64 {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatal(err)
	}
	got := make(map[string]map[int32]int64)
	for _, g := range resp.Groups {
		for _, topic := range g.Topics {
			for _, p := range topic.Partitions {
				if got[topic.Topic] == nil {
					got[topic.Topic] = make(map[int32]int64)
				}
				got[topic.Topic][p.Partition] = p.Offset
			}
		}
	}
	for _, topic := range resp.Topics {
		for _, p := range topic.Partitions {
			if got[topic.Topic] == nil {
				got[topic.Topic] = make(map[int32]int64)
			}
			got[topic.Topic][p.Partition] = p.Offset
		}
	}
	return got
}

func equalOffsets(a, b map[string]map[int32]int64) bool {
	return maps.EqualFunc(a, b, func(x, y map[int32]int64) bool { return maps.Equal(x, y) })
}

func TestEmbeddedDataDirSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := EmbeddedConfig{Topics: map[string]int32{"t": 2}, DataDir: dir}
	e, err := StartEmbedded(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := makeRecords(0, 25)
	c := newTestClient(t, e, nil)
	produce(t, c, "t", 1, want)
	c.Close()
	e.Close()

	cfg.Topics["fresh"] = 3 // a topic added to the config after the first run
	e = startEmbedded(t, cfg)
	c = newTestClient(t, e, nil)
	res, err := c.Fetch(testCtx(t), FetchRequest{Topic: "t", Partition: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Records) != len(want) || res.HighWatermark != 25 {
		t.Fatalf("after reopen: %d records hwm %d, want 25", len(res.Records), res.HighWatermark)
	}
	for i, r := range res.Records {
		checkRecord(t, r, want[i], int64(i))
	}
	if n, err := c.PartitionCount(testCtx(t), "fresh"); err != nil || n != 3 {
		t.Fatalf("PartitionCount(fresh) = %d, %v", n, err)
	}
}

func TestEmbeddedPortAndBrokers(t *testing.T) {
	e, port := startOnAFixedPort(t)
	if got, want := e.Addrs(), []string{net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}; !slices.Equal(got, want) {
		t.Fatalf("Addrs = %v, want %v", got, want)
	}
	e = startEmbedded(t, EmbeddedConfig{Brokers: 3})
	if got := e.Addrs(); len(got) != 3 {
		t.Fatalf("3 brokers: %v", got)
	}
}

// startOnAFixedPort starts a cluster on a port named in its config, as
// EmbeddedConfig.Port is what is under test: the port cannot be kfake's
// own pick. A port found free (listened on, closed) can be taken by a test
// running beside this one before kfake binds it ("address already in use",
// as TestPprofNeedsTheSyncToken failed in CI), so only that failure is
// retried, on another free port.
func startOnAFixedPort(t *testing.T) (*Embedded, int) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		e, err := StartEmbedded(EmbeddedConfig{Port: port})
		if err == nil {
			t.Cleanup(e.Close)
			return e, port
		}
		if !errors.Is(err, syscall.EADDRINUSE) || attempt == 10 {
			t.Fatalf("StartEmbedded on port %d (attempt %d): %v", port, attempt, err)
		}
		t.Logf("port %d was taken before kfake bound it (%v): another", port, err)
	}
}

func TestSASL(t *testing.T) {
	e := startEmbedded(t, EmbeddedConfig{
		Topics: map[string]int32{"t": 1},
		Options: []kfake.Opt{
			kfake.EnableSASL(),
			kfake.Superuser(SASLPlain, "plain-user", "plain-secret"),
			kfake.Superuser(SASLScramSHA256, "scram-user", "scram-secret"),
		},
	})
	for _, sasl := range []SASLConfig{
		{Mechanism: SASLPlain, Username: "plain-user", Password: "plain-secret"},
		{Mechanism: SASLScramSHA256, Username: "scram-user", Password: "scram-secret"},
	} {
		c := newTestClient(t, e, func(cfg *Config) { cfg.SASL = sasl })
		base := produce(t, c, "t", 0, makeRecords(0, 2))
		res, err := c.Fetch(testCtx(t), FetchRequest{Topic: "t", Offset: base})
		if err != nil || len(res.Records) != 2 {
			t.Fatalf("%s: fetch %d records, %v", sasl.Mechanism, len(res.Records), err)
		}
		c.Close()

		sasl.Password = "wrong"
		bad := newTestClient(t, e, func(cfg *Config) { cfg.SASL = sasl; cfg.RequestTimeout = 500 * time.Millisecond })
		_, err = bad.Fetch(testCtx(t), FetchRequest{Topic: "t"})
		// kfake hangs up on a failed authentication where Kafka would
		// first answer SASL_AUTHENTICATION_FAILED, so all we can check
		// is that the fetch fails as a broker error.
		var be *BrokerError
		if !errors.As(err, &be) {
			t.Fatalf("%s with a wrong password: %v, want a BrokerError", sasl.Mechanism, err)
		}
	}
}
