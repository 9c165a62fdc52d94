package gateway

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/broker"
	"github.com/capgate/capgate/ocap"
)

const topicRecordsPath = "/v1/topics/" + testTopic + "/records"

// topicBody is a produce body of one record per key (nil: keyless),
// valued value.
func topicBody(keys [][]byte, value string) string {
	var b strings.Builder
	b.WriteString(`{"records":[`)
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		v := base64.StdEncoding.EncodeToString([]byte(value))
		if k == nil {
			fmt.Fprintf(&b, `{"value":%q}`, v)
		} else {
			fmt.Fprintf(&b, `{"key":%q,"value":%q}`, base64.StdEncoding.EncodeToString(k), v)
		}
	}
	b.WriteString(`]}`)
	return b.String()
}

func (h *harness) produceTopic(token, topic, body string) response {
	h.t.Helper()
	return h.do(http.MethodPost, "/v1/topics/"+topic+"/records", token, strings.NewReader(body), "Content-Type", "application/json")
}

// readTopic reads every record of testTopic from Kafka directly (kgo),
// until want records are read.
func (h *harness) readTopic(want int) []*kgo.Record {
	h.t.Helper()
	parts := map[int32]kgo.Offset{}
	for p := range int32(4) {
		parts[p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.kafka.Addrs()...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{testTopic: parts}))
	if err != nil {
		h.t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			h.t.Fatalf("read %d of %d records of %s", len(out), want, testTopic)
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out
}

// TestTopicProducePlacesAsKafka: a credential writes keyed and keyless
// records to POST /v1/topics/{topic}/records; each keyed record lands on
// the partition a Kafka producer (kgo's default partitioner) puts its
// key on, the keyless ones all on one partition (the request is the
// batch of Kafka's sticky partitioner, KIP-480: round-robin put one on
// each of the 4), and the answer's per-partition base/last
// offsets and counts are where the records are.
func TestTopicProducePlacesAsKafka(t *testing.T) {
	h := newHarness(t, nil)
	cred, _ := h.mintCredential([]string{testTopic}, []string{"consume", "produce"}, time.Now(), time.Hour)

	// Where a Kafka producer puts each key: produce them with kgo first.
	var keys [][]byte
	for i := range 24 {
		keys = append(keys, fmt.Appendf(nil, "key-%d", i))
	}
	keys = append(keys, []byte{}) // an empty key is a key (hashed), not a keyless record
	kcl, err := kgo.NewClient(kgo.SeedBrokers(h.kafka.Addrs()...), kgo.DefaultProduceTopic(testTopic))
	if err != nil {
		t.Fatal(err)
	}
	kafkaPartition := map[string]int32{}
	for _, k := range keys {
		r, err := kcl.ProduceSync(context.Background(), &kgo.Record{Key: k, Value: []byte("kgo")}).First()
		if err != nil {
			t.Fatal(err)
		}
		kafkaPartition[string(k)] = r.Partition
	}
	kcl.Close()
	if len(map[int32]bool{kafkaPartition["key-0"]: true, kafkaPartition["key-1"]: true, kafkaPartition["key-2"]: true, kafkaPartition["key-3"]: true, kafkaPartition["key-4"]: true}) < 2 {
		t.Fatalf("keys all on one partition: %v", kafkaPartition)
	}

	keyless := [][]byte{nil, nil, nil, nil}
	r := h.produceTopic(cred, testTopic, topicBody(append(keys, keyless...), "gw"))
	var resp api.TopicProduceResponse
	if r.status != http.StatusOK || json.Unmarshal(r.body, &resp) != nil {
		t.Fatalf("topic produce: %d %s", r.status, r.body)
	}
	if resp.Count != len(keys)+len(keyless) {
		t.Fatalf("count %d, want %d: %s", resp.Count, len(keys)+len(keyless), r.body)
	}

	all := h.readTopic(2*len(keys) + len(keyless))
	gw := map[int32][]*kgo.Record{} // the gateway's records by partition, in offset order
	keylessOn := map[int32]int{}
	for _, rec := range all {
		if string(rec.Value) != "gw" {
			continue
		}
		gw[rec.Partition] = append(gw[rec.Partition], rec)
		if rec.Key == nil {
			keylessOn[rec.Partition]++
			continue
		}
		if want := kafkaPartition[string(rec.Key)]; rec.Partition != want {
			t.Errorf("key %q on partition %d, a Kafka producer puts it on %d", rec.Key, rec.Partition, want)
		}
	}
	if len(keylessOn) != 1 {
		t.Errorf("keyless records by partition %v: want all 4 on one (sticky, one write)", keylessOn)
	}
	if len(resp.Partitions) != len(gw) {
		t.Fatalf("answer lists %d partitions, records are on %d: %s", len(resp.Partitions), len(gw), r.body)
	}
	for i, pp := range resp.Partitions {
		recs := gw[pp.Partition]
		if i > 0 && pp.Partition <= resp.Partitions[i-1].Partition {
			t.Errorf("partitions not in order: %s", r.body)
		}
		if len(recs) == 0 || pp.Count != len(recs) || pp.BaseOffset != recs[0].Offset || pp.LastOffset != recs[len(recs)-1].Offset {
			t.Errorf("partition %d answered %+v; its records are %d at offsets %d..%d", pp.Partition, pp, len(recs), recs[0].Offset, recs[len(recs)-1].Offset)
		}
	}
}

// TestTopicProduceRefusals: every bearer or request the topic route may
// not take is refused with its documented status and code before
// anything is written.
func TestTopicProduceRefusals(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxBodyBytes, c.MaxProduceRecords = 64<<10, 5 })
	now := time.Now()
	produce := []string{"consume", "produce"}
	cred, _ := h.mintCredential([]string{testTopic, "nosuch"}, produce, now, time.Hour)
	consumeOnly, _ := h.mintCredential([]string{testTopic}, []string{"consume"}, now, time.Hour)
	otherTopic, _ := h.mintCredential([]string{"payments"}, produce, now, time.Hour)
	pattern, _ := h.mintCredential([]string{"ord*"}, produce, now, time.Hour)
	state, _ := h.mintCredential([]string{"capgate-state-x", "__consumer_offsets"}, produce, now, time.Hour)
	p := int32(0)
	capability, _ := h.mint(ocap.Claims{Subject: "m", Group: "g", Topic: testTopic, Partition: &p, Epoch: 1, Ops: ocap.Ops(ocap.OpProduce)})
	member, _, err := h.minter.Mint(ocap.KindMember, ocap.Claims{Subject: "member-1", Group: "g"}, now, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	one := topicBody([][]byte{[]byte("k")}, "v")
	big := `{"records":[{"value":"` + strings.Repeat("eHh4", 24<<10) + `"}]}`
	six := topicBody([][]byte{nil, nil, nil, nil, nil, nil}, "v")
	for _, tc := range []struct {
		name, token, topic, body string
		status                   int
		code                     api.Code
		says                     string
	}{
		{"consume-only credential", consumeOnly, testTopic, one, http.StatusForbidden, api.CodeForbidden, "does not allow produce"},
		{"credential for another topic", otherTopic, testTopic, one, http.StatusForbidden, api.CodeForbidden, "does not name topic"},
		{"credential naming the topic by a pattern", pattern, testTopic, one, http.StatusForbidden, api.CodeForbidden, "pattern"},
		{"capability on the topic route", capability, testTopic, one, http.StatusForbidden, api.CodeForbidden, "/v1/topics/{topic}/partitions/{partition}/records"},
		{"member token", member, testTopic, one, http.StatusUnauthorized, api.CodeUnauthorized, "member token cannot produce"},
		{"no bearer", "", testTopic, one, http.StatusUnauthorized, api.CodeUnauthorized, "client credential is required"},
		{"credential to a capgate state log", state, "capgate-state-x", one, http.StatusForbidden, api.CodeForbidden, "internal"},
		{"credential to Kafka's own topic", state, "__consumer_offsets", one, http.StatusForbidden, api.CodeForbidden, "internal"},
		{"unknown topic", cred, "nosuch", one, http.StatusNotFound, api.CodeNotFound, "unknown topic"},
		{"body over max_body_bytes", cred, testTopic, big, http.StatusRequestEntityTooLarge, api.CodeBodyTooLarge, "max_body_bytes"},
		{"more records than max_produce_records", cred, testTopic, six, http.StatusBadRequest, api.CodeBadRequest, "more than 5 records"},
		{"bad topic", cred, "a$b", one, http.StatusBadRequest, api.CodeBadRequest, "topic"},
	} {
		r := h.produceTopic(tc.token, tc.topic, tc.body)
		if r.status != tc.status || r.errorCode() != tc.code || !strings.Contains(string(r.body), tc.says) {
			t.Errorf("%s: %d %s, want %d %s saying %q", tc.name, r.status, r.body, tc.status, tc.code, tc.says)
		}
	}
	for p := range int32(4) {
		if _, latest, err := h.kc.Offsets(context.Background(), testTopic, p); err != nil || latest != 0 {
			t.Fatalf("refused produces wrote to %s/%d: latest %d, %v", testTopic, p, latest, err)
		}
	}
	// The per-partition route is unchanged: the capability writes there.
	if r := h.do(http.MethodPost, recordsURL(0), capability, strings.NewReader(one), "Content-Type", "application/json"); r.status != http.StatusOK {
		t.Fatalf("capability on the per-partition route: %d %s", r.status, r.body)
	}
}

// TestTopicProduceRateLimitedPerPartition: an override limiting one
// partition of the topic refuses a topic produce with a record placed
// there (429, nothing written), as it refuses the per-partition route;
// one whose records all go elsewhere is written.
func TestTopicProduceRateLimitedPerPartition(t *testing.T) {
	h := newHarness(t, nil)
	cred, _ := h.mintCredential([]string{testTopic}, []string{"consume", "produce"}, time.Now(), time.Hour)
	byPartition := map[int32][]byte{}
	for i := 0; len(byPartition) < 4; i++ {
		k := fmt.Appendf(nil, "k%d", i)
		part := h.kafkaPartitionOf(k)
		if byPartition[part] == nil {
			byPartition[part] = k
		}
	}
	p := int32(2)
	seq := h.sync.push(api.SyncResponse{QoS: []api.QoSOverride{{ID: "slow-p2", Selector: api.QoSSelector{Topic: testTopic, Partition: &p}, MaxBytesPerSec: 10, Until: time.Now().Add(time.Hour).Unix()}}})
	h.sync.waitAck(t, seq)
	if r := h.produceTopic(cred, testTopic, topicBody([][]byte{byPartition[2]}, "v")); r.status != http.StatusOK {
		t.Fatalf("first produce to partition 2: %d %s", r.status, r.body)
	}
	r := h.produceTopic(cred, testTopic, topicBody([][]byte{byPartition[1], byPartition[2]}, "v"))
	expectError(t, r, http.StatusTooManyRequests, api.CodeRateLimited)
	if _, latest, err := h.kc.Offsets(context.Background(), testTopic, 1); err != nil || latest != 0 {
		t.Fatalf("a refused topic produce wrote to partition 1: latest %d, %v", latest, err)
	}
	if r := h.produceTopic(cred, testTopic, topicBody([][]byte{byPartition[1], byPartition[3]}, "v")); r.status != http.StatusOK {
		t.Fatalf("produce to partitions 1 and 3, which the override does not select: %d %s", r.status, r.body)
	}
}

// kafkaPartitionOf is the partition kgo's default partitioner gives key
// over the 4 partitions of testTopic.
func (h *harness) kafkaPartitionOf(key []byte) int32 {
	return int32(kgo.StickyKeyPartitioner(nil).ForTopic(testTopic).Partition(&kgo.Record{Key: key}, 4))
}

// TestTopicProducePartialFailureSaysWhatWasWritten: when one partition's
// write fails and another's succeeded, the answer is the failure's error
// (the broker's code, not 200) and details.partitions says, for each
// partition, whether it was written and where. Kafka (kfake) cannot fail
// one partition of a produce alone, so the outcomes are handed in.
func TestTopicProducePartialFailureSaysWhatWasWritten(t *testing.T) {
	g := &Gateway{}
	ctx := &fasthttp.RequestCtx{}
	c := &call{g: g, ctx: ctx, records: 5}
	shares := []*share{
		{partition: 0, recs: []*kgo.Record{{Offset: 7}, {Offset: 8}}},
		{partition: 2, recs: []*kgo.Record{{Offset: -1}}, err: &broker.BrokerError{Op: "produce", Err: kerr.InvalidRecord}},
		// redteam9 #3: its first record landed before the second failed.
		{partition: 3, recs: []*kgo.Record{{Offset: 4}, {Offset: -1}}, err: &broker.BrokerError{Op: "produce", Err: kerr.MessageTooLarge}},
	}
	if code := c.answerShares(shares); code != api.CodeBadRequest || ctx.Response.StatusCode() != http.StatusBadRequest {
		t.Fatalf("partial failure answered %s %d: %s", code, ctx.Response.StatusCode(), ctx.Response.Body())
	}
	var body struct {
		Error struct {
			Message    string           `json:"message"`
			Partitions []map[string]any `json:"partitions"`
		} `json:"error"`
	}
	if err := json.Unmarshal(ctx.Response.Body(), &body); err != nil {
		t.Fatal(err)
	}
	ps := body.Error.Partitions
	if len(ps) != 3 || ps[1]["written_count"] != nil || ps[2]["written"] != false || ps[2]["written_count"] != 1.0 ||
		fmt.Sprint(ps[2]["written_offsets"]) != "[4]" {
		t.Fatalf("a partition whose first record was written before the second failed: %s", ctx.Response.Body())
	}
	if ps[0]["written"] != true || ps[0]["base_offset"] != 7.0 || ps[0]["last_offset"] != 8.0 || ps[0]["count"] != 2.0 ||
		ps[1]["written"] != false || ps[1]["partition"] != 2.0 || ps[1]["error"] == nil || !strings.Contains(body.Error.Message, "partition 2") {
		t.Fatalf("partial failure: %s", ctx.Response.Body())
	}
}

// TestTopicProduceChargesEachPartitionItsOwnBytes (redteam9 #1): a topic
// produce's bytes are charged to each partition by the size of its own
// records. Split by record count, one large record to a rate-limited
// partition beside many empty ones to another was charged a hundredth
// of its size, and the next produce to it was admitted at once.
func TestTopicProduceChargesEachPartitionItsOwnBytes(t *testing.T) {
	h := newHarness(t, nil)
	cred, _ := h.mintCredential([]string{testTopic}, []string{"consume", "produce"}, time.Now(), time.Hour)
	byPartition := map[int32][]byte{}
	for i := 0; len(byPartition) < 4; i++ {
		k := fmt.Appendf(nil, "k%d", i)
		if part := h.kafkaPartitionOf(k); byPartition[part] == nil {
			byPartition[part] = k
		}
	}
	p := int32(2)
	seq := h.sync.push(api.SyncResponse{QoS: []api.QoSOverride{{ID: "slow-p2", Selector: api.QoSSelector{Topic: testTopic, Partition: &p}, MaxBytesPerSec: 4000, Until: time.Now().Add(time.Hour).Unix()}}})
	h.sync.waitAck(t, seq)
	var b strings.Builder
	fmt.Fprintf(&b, `{"records":[{"key":%q,"value":%q}`, base64.StdEncoding.EncodeToString(byPartition[2]), base64.StdEncoding.EncodeToString(make([]byte, 30000)))
	for range 99 {
		fmt.Fprintf(&b, `,{"key":%q,"value":""}`, base64.StdEncoding.EncodeToString(byPartition[1]))
	}
	b.WriteString(`]}`)
	if r := h.produceTopic(cred, testTopic, b.String()); r.status != http.StatusOK {
		t.Fatalf("30 KB to partition 2 beside 99 empty records to partition 1: %d %s", r.status, r.body)
	}
	r := h.produceTopic(cred, testTopic, topicBody([][]byte{byPartition[2]}, "v"))
	expectError(t, r, http.StatusTooManyRequests, api.CodeRateLimited)
}
