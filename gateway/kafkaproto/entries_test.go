package kafkaproto

import (
	"errors"
	"fmt"
	"math/rand"
	"runtime"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// randomEntries builds a request of key at version v naming random
// topics and partitions (random names, records, metadata and unknown
// tags), and the counts overEntries must find: topic entries and
// partitions, Fetch's forgotten topics included.
func randomEntries(r *rand.Rand, key kmsg.Key, v int16) (kmsg.Request, int, int) {
	name := func() string { return fmt.Sprintf("t%0*d", r.Intn(8), r.Intn(1000)) }
	tags := func() kmsg.Tags {
		var t kmsg.Tags
		if r.Intn(3) == 0 {
			t.Set(uint32(10+r.Intn(5)), make([]byte, r.Intn(20)))
		}
		return t
	}
	topics, parts := r.Intn(6), 0
	n := func() int { k := r.Intn(7); parts += k; return k }
	switch key {
	case kmsg.Fetch:
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(v)
		for range topics {
			t := kmsg.NewFetchRequestTopic()
			t.Topic, t.UnknownTags = name(), tags()
			for i := range n() {
				p := kmsg.NewFetchRequestTopicPartition()
				p.Partition, p.FetchOffset, p.UnknownTags = int32(i), r.Int63(), tags()
				t.Partitions = append(t.Partitions, p)
			}
			req.Topics = append(req.Topics, t)
		}
		if v >= 7 {
			forgotten := r.Intn(3)
			topics += forgotten
			for range forgotten {
				f := kmsg.NewFetchRequestForgottenTopic()
				f.Topic, f.UnknownTags = name(), tags()
				for i := range n() {
					f.Partitions = append(f.Partitions, int32(i))
				}
				req.ForgottenTopics = append(req.ForgottenTopics, f)
			}
		}
		req.Rack = name()
		return req, topics, parts
	case kmsg.ListOffsets:
		req := kmsg.NewPtrListOffsetsRequest()
		req.SetVersion(v)
		for range topics {
			t := kmsg.NewListOffsetsRequestTopic()
			t.Topic, t.UnknownTags = name(), tags()
			for i := range n() {
				p := kmsg.NewListOffsetsRequestTopicPartition()
				p.Partition, p.Timestamp, p.UnknownTags = int32(i), -1, tags()
				t.Partitions = append(t.Partitions, p)
			}
			req.Topics = append(req.Topics, t)
		}
		return req, topics, parts
	case kmsg.Produce:
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(v)
		if r.Intn(2) == 0 {
			id := name()
			req.TransactionID = &id
		}
		for range topics {
			t := kmsg.NewProduceRequestTopic()
			t.Topic, t.UnknownTags = name(), tags()
			for i := range n() {
				p := kmsg.NewProduceRequestTopicPartition()
				p.Partition, p.UnknownTags = int32(i), tags()
				if r.Intn(3) > 0 {
					p.Records = make([]byte, r.Intn(300))
				}
				t.Partitions = append(t.Partitions, p)
			}
			req.Topics = append(req.Topics, t)
		}
		return req, topics, parts
	case kmsg.OffsetCommit:
		req := kmsg.NewPtrOffsetCommitRequest()
		req.SetVersion(v)
		req.Group, req.MemberID = name(), name()
		if r.Intn(2) == 0 {
			id := name()
			req.InstanceID = &id
		}
		for range topics {
			t := kmsg.NewOffsetCommitRequestTopic()
			t.Topic, t.UnknownTags = name(), tags()
			for i := range n() {
				p := kmsg.NewOffsetCommitRequestTopicPartition()
				p.Partition, p.Offset, p.UnknownTags = int32(i), r.Int63(), tags()
				if r.Intn(2) == 0 {
					m := name()
					p.Metadata = &m
				}
				t.Partitions = append(t.Partitions, p)
			}
			req.Topics = append(req.Topics, t)
		}
		return req, topics, parts
	case kmsg.Metadata:
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(v)
		if r.Intn(4) == 0 {
			req.Topics = nil // every topic: names none
			return req, 0, 0
		}
		req.Topics = []kmsg.MetadataRequestTopic{}
		for range topics {
			t := kmsg.NewMetadataRequestTopic()
			s := name()
			t.Topic, t.UnknownTags = &s, tags()
			req.Topics = append(req.Topics, t)
		}
		return req, topics, 0
	}
	return randomGroupRequest(r, key, v, name, tags)
}

// randomGroupRequest is randomEntries for the group and admin requests:
// their counted entries (groups, members, protocols, assignments, topics,
// keys; never partition ids) as the first count.
func randomGroupRequest(r *rand.Rand, key kmsg.Key, v int16, name func() string, tags func() kmsg.Tags) (kmsg.Request, int, int) {
	entries := 0
	n := func() int { k := r.Intn(6); entries += k; return k }
	names := func() []string {
		out := make([]string, n())
		for i := range out {
			out[i] = name()
		}
		return out
	}
	ids := func() []int32 { return make([]int32, r.Intn(5)) }
	str := func() *string { s := name(); return &s }
	var req kmsg.Request
	switch key {
	case kmsg.DescribeGroups:
		q := kmsg.NewPtrDescribeGroupsRequest()
		q.Groups = names()
		req = q
	case kmsg.ConsumerGroupDescribe:
		q := kmsg.NewPtrConsumerGroupDescribeRequest()
		q.Groups = names()
		req = q
	case kmsg.ListGroups:
		q := kmsg.NewPtrListGroupsRequest()
		if v >= 4 {
			q.StatesFilter = names()
		}
		if v >= 5 {
			q.TypesFilter = names()
		}
		req = q
	case kmsg.FindCoordinator:
		q := kmsg.NewPtrFindCoordinatorRequest()
		q.CoordinatorKey = name()
		if v >= 4 {
			q.CoordinatorKeys = names()
		}
		req = q
	case kmsg.OffsetFetch:
		q := kmsg.NewPtrOffsetFetchRequest()
		if v <= 7 {
			q.Group = name()
			for range n() {
				t := kmsg.NewOffsetFetchRequestTopic()
				t.Topic, t.Partitions, t.UnknownTags = name(), ids(), tags()
				q.Topics = append(q.Topics, t)
			}
			req = q
			break
		}
		for range n() {
			g := kmsg.NewOffsetFetchRequestGroup()
			g.Group, g.MemberID, g.UnknownTags = name(), str(), tags()
			for range n() {
				t := kmsg.NewOffsetFetchRequestGroupTopic()
				t.Topic, t.Partitions, t.UnknownTags = name(), ids(), tags()
				g.Topics = append(g.Topics, t)
			}
			q.Groups = append(q.Groups, g)
		}
		req = q
	case kmsg.JoinGroup:
		q := kmsg.NewPtrJoinGroupRequest()
		q.Group, q.MemberID, q.InstanceID, q.ProtocolType, q.Reason = name(), name(), str(), name(), str()
		for range n() {
			p := kmsg.NewJoinGroupRequestProtocol()
			p.Name, p.Metadata, p.UnknownTags = name(), make([]byte, r.Intn(40)), tags()
			q.Protocols = append(q.Protocols, p)
		}
		req = q
	case kmsg.SyncGroup:
		q := kmsg.NewPtrSyncGroupRequest()
		q.Group, q.MemberID, q.InstanceID, q.ProtocolType, q.Protocol = name(), name(), str(), str(), str()
		for range n() {
			a := kmsg.NewSyncGroupRequestGroupAssignment()
			a.MemberID, a.MemberAssignment, a.UnknownTags = name(), make([]byte, r.Intn(40)), tags()
			q.GroupAssignment = append(q.GroupAssignment, a)
		}
		req = q
	case kmsg.LeaveGroup:
		q := kmsg.NewPtrLeaveGroupRequest()
		q.Group, q.MemberID = name(), name()
		if v >= 3 { // members from v3
			for range n() {
				m := kmsg.NewLeaveGroupRequestMember()
				m.MemberID, m.InstanceID, m.Reason, m.UnknownTags = name(), str(), str(), tags()
				q.Members = append(q.Members, m)
			}
		}
		req = q
	case kmsg.ConsumerGroupHeartbeat:
		q := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		q.Group, q.MemberID, q.InstanceID, q.RackID, q.ServerAssignor = name(), name(), str(), str(), str()
		q.SubscribedTopicNames = names()
		if v >= 1 {
			q.SubscribedTopicRegex = str()
		}
		for range n() {
			t := kmsg.NewConsumerGroupHeartbeatRequestTopic()
			t.Partitions, t.UnknownTags = ids(), tags()
			q.Topics = append(q.Topics, t)
		}
		req = q
	default:
		panic(key)
	}
	req.SetVersion(v)
	return req, entries, 0
}

// TestEntryWalkerAgainstKmsg: on thousands of random requests of every
// version the listener parses of each bounded API, overEntries refuses
// exactly when the topic entries or the partitions kmsg decodes exceed
// the bound, and kmsg decodes every request it lets through.
func TestEntryWalkerAgainstKmsg(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	for _, key := range []kmsg.Key{kmsg.Fetch, kmsg.ListOffsets, kmsg.Produce, kmsg.OffsetCommit, kmsg.Metadata,
		kmsg.DescribeGroups, kmsg.ConsumerGroupDescribe, kmsg.ListGroups, kmsg.FindCoordinator, kmsg.OffsetFetch,
		kmsg.JoinGroup, kmsg.SyncGroup, kmsg.LeaveGroup, kmsg.ConsumerGroupHeartbeat} {
		api, _ := lookupAPI(int16(key))
		for v := api.min; v <= api.max; v++ {
			for range 300 {
				req, topics, parts := randomEntries(r, key, v)
				frame := kmsg.NewRequestFormatter().AppendRequest(nil, req, 1)
				most := max(topics, parts)
				for _, bound := range []int{most - 1, most, most + 1} {
					if bound < 1 {
						continue
					}
					_, decoded, err := parseRequest(frame[4:], bound)
					over := errors.Is(err, errTooManyEntries)
					if over != (most > bound) || (!over && err != nil) {
						t.Fatalf("%s v%d, %d topics %d partitions, bound %d: %v", key.Name(), v, topics, parts, bound, err)
					}
					if !over && decoded == nil {
						t.Fatalf("%s v%d: not decoded", key.Name(), v)
					}
				}
			}
		}
	}
}

// TestRefusedRequestIsNotDecoded is the attack of redteam5 #1 at the
// parser: a Fetch of 20,000 partitions (one topic, and one partition in
// each of 20,000 topics), a Metadata of 20,000 topics, the others, and
// DescribeGroups and OffsetFetch naming 20,000 (empty) groups are
// refused before kmsg decodes an entry. Without the walk, the
// decode alone allocates megabytes (Fetch partitions are 16 bytes on
// the wire, their struct several times that).
func TestRefusedRequestIsNotDecoded(t *testing.T) {
	const n = 20_000
	onePartitionEach := kmsg.NewPtrFetchRequest()
	onePartitionEach.SetVersion(12)
	oneTopic := kmsg.NewPtrFetchRequest()
	oneTopic.SetVersion(4)
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "orders"
	metadata := kmsg.NewPtrMetadataRequest()
	metadata.SetVersion(4)
	list := kmsg.NewPtrListOffsetsRequest()
	list.SetVersion(5)
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "orders"
	produce := kmsg.NewPtrProduceRequest()
	produce.SetVersion(7)
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "orders"
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.SetVersion(8)
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = "orders"
	for i := range n {
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition = int32(i % 12)
		ft.Partitions = append(ft.Partitions, p)
		t := kmsg.NewFetchRequestTopic()
		t.Topic, t.Partitions = fmt.Sprintf("t-%d", i), []kmsg.FetchRequestTopicPartition{p}
		onePartitionEach.Topics = append(onePartitionEach.Topics, t)
		mt := kmsg.NewMetadataRequestTopic()
		name := t.Topic
		mt.Topic = &name
		metadata.Topics = append(metadata.Topics, mt)
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition = p.Partition
		lt.Partitions = append(lt.Partitions, lp)
		pp := kmsg.NewProduceRequestTopicPartition()
		pp.Partition = p.Partition
		pt.Partitions = append(pt.Partitions, pp)
		cp := kmsg.NewOffsetCommitRequestTopicPartition()
		cp.Partition = p.Partition
		ct.Partitions = append(ct.Partitions, cp)
	}
	describe := kmsg.NewPtrDescribeGroupsRequest()
	describe.SetVersion(5)
	describe.Groups = make([]string, n)
	offsetFetch := kmsg.NewPtrOffsetFetchRequest()
	offsetFetch.SetVersion(8)
	offsetFetch.Groups = make([]kmsg.OffsetFetchRequestGroup, n)
	oneTopic.Topics = []kmsg.FetchRequestTopic{ft}
	list.Topics = []kmsg.ListOffsetsRequestTopic{lt}
	produce.Topics = []kmsg.ProduceRequestTopic{pt}
	commit.Topics = []kmsg.OffsetCommitRequestTopic{ct}
	for _, tc := range []struct {
		name string
		req  kmsg.Request
	}{{"fetch one topic", oneTopic}, {"fetch a topic each", onePartitionEach}, {"metadata", metadata},
		{"list offsets", list}, {"produce", produce}, {"offset commit", commit},
		{"describe groups", describe}, {"offset fetch groups", offsetFetch}} {
		frame := kmsg.NewRequestFormatter().AppendRequest(nil, tc.req, 1)[4:]
		var err error
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, _, err = parseRequest(frame, DefaultMaxRequestPartitions)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, errTooManyEntries) {
			t.Errorf("%s: %v, want errTooManyEntries", tc.name, err)
		}
		// The request struct and the error's text, and the runtime's own noise;
		// the frames are 20 KB to 1 MB, decoding them 0.6–3 MB.
		if allocs, bytes := after.Mallocs-before.Mallocs, after.TotalAlloc-before.TotalAlloc; allocs > 64 || bytes > 64<<10 {
			t.Errorf("%s (%d bytes): refusing it allocated %d times, %d bytes", tc.name, len(frame), allocs, bytes)
		}
	}
}

// BenchmarkEntryWalk: what the walk adds to parsing a group member's
// Fetch (v12, 12 partitions of one topic), against kmsg's decode alone
// in the same run.
func BenchmarkEntryWalk(b *testing.B) {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	t := kmsg.NewFetchRequestTopic()
	t.Topic = "orders"
	for i := range 12 {
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition = int32(i)
		t.Partitions = append(t.Partitions, p)
	}
	req.Topics = []kmsg.FetchRequestTopic{t}
	frame := kmsg.NewRequestFormatter().AppendRequest(nil, req, 1)[4:]
	body := frame[len(frame)-len(req.AppendTo(nil)):]
	var decode, walk float64
	b.Run("kmsg decode", func(b *testing.B) {
		for b.Loop() {
			r := kmsg.NewPtrFetchRequest()
			r.SetVersion(12)
			if err := r.ReadFrom(body); err != nil {
				b.Fatal(err)
			}
		}
		decode = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	b.Run("walk", func(b *testing.B) {
		for b.Loop() {
			if err := overEntries(int16(kmsg.Fetch), 12, body, DefaultMaxRequestPartitions); err != nil {
				b.Fatal(err)
			}
		}
		walk = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		if decode > 0 {
			b.ReportMetric(walk/decode, "walk/decode")
		}
	})
}
