package gateway

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/gateway/kafkaproto"
)

// kafkaWire is a raw connection to the gateway's Kafka listener,
// authenticated with SASL PLAIN. Frames are encoded before they are sent,
// so what a test measures around a send is the gateway's work, not the
// client's.
type kafkaWire struct {
	t   testing.TB
	nc  net.Conn
	fmt *kmsg.RequestFormatter
}

func dialKafkaWire(t testing.TB, addr, token string) *kafkaWire {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	w := &kafkaWire{t: t, nc: nc, fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID("bound-test"))}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = "PLAIN"
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.SetVersion(1)
	auth.SASLAuthBytes = []byte("\x00capgate\x00" + token)
	for _, req := range []kmsg.Request{hs, auth} {
		resp, err := w.roundTrip(w.frame(req), req)
		if err != nil {
			t.Fatal(err)
		}
		if code := errorCodeOf(resp); code != 0 {
			t.Fatalf("SASL: error %d", code)
		}
	}
	return w
}

func errorCodeOf(resp kmsg.Response) int16 {
	switch r := resp.(type) {
	case *kmsg.SASLHandshakeResponse:
		return r.ErrorCode
	case *kmsg.SASLAuthenticateResponse:
		return r.ErrorCode
	}
	return 0
}

func (w *kafkaWire) frame(req kmsg.Request) []byte { return w.fmt.AppendRequest(nil, req, 7) }

// roundTrip sends frame and reads req's answer; an error is the
// connection's (io.EOF: closed unanswered).
func (w *kafkaWire) roundTrip(frame []byte, req kmsg.Request) (kmsg.Response, error) {
	if err := w.nc.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		return nil, err
	}
	if _, err := w.nc.Write(frame); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(w.nc, size[:]); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(w.nc, body); err != nil {
		return nil, err
	}
	resp := req.ResponseKind()
	body = body[4:] // correlation id
	if resp.IsFlexible() && req.Key() != int16(kmsg.ApiVersions) {
		body = body[1:] // response header tags
	}
	return resp, resp.ReadFrom(body)
}

// costOf sends frame and reads the answer or the close, and reports what
// the process allocated meanwhile: the gateway's work (the frame was
// encoded before).
func (w *kafkaWire) costOf(frame []byte, req kmsg.Request) (resp kmsg.Response, err error, allocs, bytes uint64) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	resp, err = w.roundTrip(frame, req)
	runtime.ReadMemStats(&after)
	return resp, err, after.Mallocs - before.Mallocs, after.TotalAlloc - before.TotalAlloc
}

// metricValue is a sample of the gateway's /metrics (0 when absent).
func (h *harness) metricValue(sample string) float64 {
	for _, line := range strings.Split(string(h.get("", "/metrics").body), "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return n
		}
	}
	return 0
}

// entriesRefused is the metric of requests refused over
// kafka_max_request_partitions.
var entriesRefused = `capgate_gateway_requests_total{code="` + string(api.CodeLimitExceeded) + `",route="` + kafkaproto.OpRequest + `"}`

// boundedRequests are requests naming n entries each (partitions, or
// Metadata's topics), as redteam5's attacker built them: the same few
// partitions again and again.
func boundedRequests(n int) map[string]kmsg.Request {
	fetch := kmsg.NewPtrFetchRequest()
	fetch.SetVersion(4)
	fetch.ReplicaID, fetch.MaxBytes = -1, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = testTopic
	list := kmsg.NewPtrListOffsetsRequest()
	list.SetVersion(5)
	list.ReplicaID = -1
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = testTopic
	produce := kmsg.NewPtrProduceRequest()
	produce.SetVersion(7)
	produce.Acks, produce.TimeoutMillis = 1, 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = testTopic
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.SetVersion(8)
	commit.Group, commit.Generation, commit.MemberID = "g", 1, "member-1"
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = testTopic
	metadata := kmsg.NewPtrMetadataRequest()
	metadata.SetVersion(4)
	describe := kmsg.NewPtrDescribeGroupsRequest()
	describe.SetVersion(5)
	offsetFetch := kmsg.NewPtrOffsetFetchRequest()
	offsetFetch.SetVersion(8)
	for i := range n {
		describe.Groups = append(describe.Groups, "g")
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group = "g"
		offsetFetch.Groups = append(offsetFetch.Groups, g)
		p := int32(i % 4)
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.PartitionMaxBytes = p, 1
		ft.Partitions = append(ft.Partitions, fp)
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition, lp.Timestamp = p, -1
		lt.Partitions = append(lt.Partitions, lp)
		pp := kmsg.NewProduceRequestTopicPartition()
		pp.Partition = p
		pt.Partitions = append(pt.Partitions, pp)
		cp := kmsg.NewOffsetCommitRequestTopicPartition()
		cp.Partition, cp.Offset = p, 1
		ct.Partitions = append(ct.Partitions, cp)
		mt := kmsg.NewMetadataRequestTopic()
		name := fmt.Sprintf("t-%d", i)
		mt.Topic = &name
		metadata.Topics = append(metadata.Topics, mt)
	}
	fetch.Topics = []kmsg.FetchRequestTopic{ft}
	list.Topics = []kmsg.ListOffsetsRequestTopic{lt}
	produce.Topics = []kmsg.ProduceRequestTopic{pt}
	commit.Topics = []kmsg.OffsetCommitRequestTopic{ct}
	return map[string]kmsg.Request{"Fetch": fetch, "ListOffsets": list, "Produce": produce, "OffsetCommit": commit, "Metadata": metadata,
		"DescribeGroups": describe, "OffsetFetch": offsetFetch}
}

// TestRequestsNamingTooManyPartitionsRefused is redteam5 #1: one
// authenticated client's Fetch named hundreds of thousands of partitions
// (only kafka_max_request_bytes bounded it) and the gateway spent ~190 MB
// and half a second on each, refused or not; ListOffsets, Produce,
// OffsetCommit and Metadata had the same shape, and kmsg's decode alone
// of the group requests' arrays (DescribeGroups, OffsetFetch groups) is
// many times their frame. Now a request naming
// more than kafka_max_request_partitions (10,000) entries is refused
// before it is decoded: the connection closes unanswered, the refusal is
// counted and logged (no token), and refusing it costs the gateway
// allocations bounded by its frame, none per partition. A request within
// the bound is answered, and a Kafka client on another connection
// consumes and produces as before.
func TestRequestsNamingTooManyPartitionsRefused(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	h := newHarnessWith(t, harnessOptions{log: zap.New(core), edit: func(c *Config) {
		c.KafkaListen, c.KafkaFetchLanes = "127.0.0.1:0", 1
	}})
	h.waitReady()
	token, _ := h.mint(withOps(capClaims(0), "fetch", "produce"))
	h.produce(0, 10)
	within, over := boundedRequests(1000), boundedRequests(20_000)
	for _, name := range []string{"Fetch", "ListOffsets", "Produce", "OffsetCommit", "Metadata", "DescribeGroups", "OffsetFetch"} {
		t.Run(name, func(t *testing.T) {
			w := dialKafkaWire(t, h.gw.KafkaAddr(), token)
			if _, err := w.roundTrip(w.frame(within[name]), within[name]); err != nil {
				t.Fatalf("1,000 entries: %v, want an answer", err)
			}
			refused := h.metricValue(entriesRefused)
			frame := w.frame(over[name])
			resp, err, allocs, bytes := w.costOf(frame, over[name])
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !strings.Contains(fmt.Sprint(err), "reset") {
				t.Errorf("20,000 entries: answered (%T, %v), want the connection closed", resp, err)
			}
			// Reading the frame costs about twice its size (a buffer grown
			// by doubling); per entry, the decode alone was 3-5 times the
			// frame, the handlers many times more.
			if limit := uint64(3*len(frame) + 256<<10); bytes > limit || allocs > 2000 {
				t.Errorf("refusing %d bytes of 20,000 entries allocated %d bytes in %d allocations, want at most %d bytes, 2,000 allocations",
					len(frame), bytes, allocs, limit)
			}
			t.Logf("%s: frame %d bytes, %d allocations, %d bytes", name, len(frame), allocs, bytes)
			if n := h.metricValue(entriesRefused); n != refused+1 {
				t.Errorf("%s: %v, want %v", entriesRefused, n, refused+1)
			}
		})
	}
	lines := logs.FilterMessage("kafka request refused").All()
	if len(lines) != 7 {
		t.Fatalf("%d refusal lines, want 7 (one per refused request)", len(lines))
	}
	for _, l := range lines {
		reason, _ := l.ContextMap()["reason"].(string)
		if !strings.Contains(reason, "kafka_max_request_partitions (10000)") || strings.Contains(fmt.Sprint(l.ContextMap()), token) {
			t.Fatalf("refusal line: %v", l.ContextMap())
		}
	}
	consumeAndProduce(t, h, token)
}

// consumeAndProduce: a kgo client consumes orders/0 and produces to it
// through the listener.
func consumeAndProduce(t *testing.T, h *harness, token string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.gw.KafkaAddr()), kgo.SASL(plain.Auth{User: "capgate", Pass: token}.AsMechanism()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{testTopic: {0: kgo.NewOffset().AtStart()}}),
		kgo.DefaultProduceTopic(testTopic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	got := 0
	for got < 11 && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("consume: %v", err)
		}
		got += fs.NumRecords()
	}
	if got != 11 {
		t.Fatalf("consumed %d records, want 11", got)
	}
}

// TestRepeatedPartitionServedOnce is the amplification of redteam5 #1:
// a Fetch naming one partition 1,000 times was served 1,000 times (the
// same records, as many times as MaxBytes allowed), and a ListOffsets
// naming it 1,000 times went to Kafka as a 1,000-partition request. Now
// the Fetch answers the partition once, with its records once, as
// Kafka's broker does; the ListOffsets answers every naming
// INVALID_REQUEST, as Kafka's does, and asks Kafka nothing.
func TestRepeatedPartitionServedOnce(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.KafkaListen, c.KafkaFetchLanes = "127.0.0.1:0", 1 })
	token, _ := h.mint(capClaims(0))
	h.produce(0, 50)
	fetch := func(times int) *kmsg.FetchResponse {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(4)
		req.ReplicaID, req.MaxBytes = -1, 50<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = testTopic
		for range times {
			p := kmsg.NewFetchRequestTopicPartition()
			p.PartitionMaxBytes = 1 << 20
			rt.Partitions = append(rt.Partitions, p)
		}
		req.Topics = []kmsg.FetchRequestTopic{rt}
		w := dialKafkaWire(t, h.gw.KafkaAddr(), token)
		resp, err := w.roundTrip(w.frame(req), req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.FetchResponse)
	}
	recordBytes := func(resp *kmsg.FetchResponse) (entries, n int) {
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				entries++
				n += len(p.RecordBatches)
			}
		}
		return entries, n
	}
	_, once := recordBytes(fetch(1))
	if once == 0 {
		t.Fatal("no records fetched")
	}
	if entries, n := recordBytes(fetch(1000)); entries != 1 || n != once {
		t.Fatalf("orders/0 named 1,000 times: %d entries, %d record bytes; named once: 1 entry, %d bytes", entries, n, once)
	}

	var asked atomic.Int64
	h.kafka.Cluster().ControlKey(int16(kmsg.ListOffsets), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		h.kafka.Cluster().KeepControl()
		for _, t := range kreq.(*kmsg.ListOffsetsRequest).Topics {
			asked.Add(int64(len(t.Partitions)))
		}
		return nil, nil, false
	})
	list := func(times int) []kmsg.ListOffsetsResponseTopicPartition {
		req := kmsg.NewPtrListOffsetsRequest()
		req.SetVersion(5)
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = testTopic
		for range times {
			p := kmsg.NewListOffsetsRequestTopicPartition()
			p.Timestamp = -1
			rt.Partitions = append(rt.Partitions, p)
		}
		req.Topics = []kmsg.ListOffsetsRequestTopic{rt}
		w := dialKafkaWire(t, h.gw.KafkaAddr(), token)
		resp, err := w.roundTrip(w.frame(req), req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.ListOffsetsResponse).Topics[0].Partitions
	}
	if got := list(1); len(got) != 1 || got[0].ErrorCode != 0 || got[0].Offset != 50 || asked.Load() != 1 {
		t.Fatalf("orders/0 listed once: %+v, Kafka asked for %d partitions", got, asked.Load())
	}
	got := list(1000)
	for i, p := range got {
		if p.ErrorCode != kerr.InvalidRequest.Code {
			t.Fatalf("naming %d of 1,000: error %d, want INVALID_REQUEST", i, p.ErrorCode)
		}
	}
	if len(got) != 1000 || asked.Load() != 1 {
		t.Fatalf("orders/0 listed 1,000 times: %d answers, Kafka asked for %d partitions in all, want 1,000 and 1", len(got), asked.Load())
	}
}
