package kafkaproto

// Behavior: ListOffsets v1–v7.
//
//   - A capability connection may list offsets of its own partition (the
//     capability must still be admitted: not fenced, denied or expired);
//     a client-credential connection those of any partition of a topic its
//     tps claim allows. Offsets are not data: a group member resetting a
//     partition it was just granted needs them before it may fetch.
//   - Admitted partitions go to Kafka in one request (kgo splits it by
//     leader); answers pass through with the leader epoch -1.
//   - A partition named more than once is answered INVALID_REQUEST at
//     each naming and not asked of Kafka, as Kafka's broker answers
//     duplicates (a partition named 400,000 times went to Kafka as a
//     400,000-partition ListOffsets: redteam5 #1).

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/ocap"
)

func handleListOffsets(c *conn, _ header, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	now := time.Now()
	up := kmsg.NewPtrListOffsetsRequest()
	up.ReplicaID, up.IsolationLevel = -1, req.IsolationLevel
	type slot struct {
		topic string
		out   *kmsg.ListOffsetsResponseTopicPartition
	}
	var slots []slot
	dups := duplicateListed(req)
	resp.Topics = make([]kmsg.ListOffsetsResponseTopic, len(req.Topics))
	for i, rt := range req.Topics {
		t := &resp.Topics[i]
		*t = kmsg.NewListOffsetsResponseTopic()
		t.Topic = rt.Topic
		t.Partitions = make([]kmsg.ListOffsetsResponseTopicPartition, len(rt.Partitions))
		var upParts []kmsg.ListOffsetsRequestTopicPartition
		for j, rp := range rt.Partitions {
			out := &t.Partitions[j]
			*out = kmsg.NewListOffsetsResponseTopicPartition()
			out.Partition, out.Timestamp, out.Offset, out.LeaderEpoch = rp.Partition, -1, -1, -1
			if _, dup := dups[partKey{topic: rt.Topic, partition: rp.Partition}]; dup {
				out.ErrorCode = kerr.InvalidRequest.Code
				continue
			}
			if code := c.admitList(rt.Topic, rp.Partition, now); code != "" {
				out.ErrorCode = c.partitionError(code)
				continue
			}
			p := kmsg.NewListOffsetsRequestTopicPartition()
			p.Partition, p.Timestamp, p.CurrentLeaderEpoch = rp.Partition, rp.Timestamp, -1
			upParts = append(upParts, p)
			slots = append(slots, slot{topic: rt.Topic, out: out})
		}
		if len(upParts) > 0 {
			ut := kmsg.NewListOffsetsRequestTopic()
			ut.Topic, ut.Partitions = rt.Topic, upParts
			up.Topics = append(up.Topics, ut)
		}
	}
	if len(slots) == 0 {
		return resp, nil
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.s.cfg.RequestTimeout)
	defer cancel()
	kresp, err := c.s.gate.Broker().Request(ctx, up)
	for _, s := range slots {
		s.out.ErrorCode = kerr.LeaderNotAvailable.Code
		if err != nil {
			continue
		}
		if a := findListed(kresp.(*kmsg.ListOffsetsResponse), s.topic, s.out.Partition); a != nil {
			s.out.ErrorCode, s.out.Timestamp, s.out.Offset = a.ErrorCode, a.Timestamp, a.Offset
			if s.out.ErrorCode == kerr.NotLeaderForPartition.Code || s.out.ErrorCode == kerr.FencedLeaderEpoch.Code {
				s.out.ErrorCode = kerr.LeaderNotAvailable.Code
			}
		}
	}
	return resp, nil
}

func (c *conn) admitList(topic string, partition int32, now time.Time) api.Code {
	if c.principal.capability() {
		return c.admit(topic, partition, ocap.OpFetch, -1, now).code
	}
	if c.s.internalTopic(topic) || !c.principal.Claims.AllowsTopic(topic) {
		return api.CodeForbidden // internal topics, hidden by Metadata too, are no client's
	}
	return c.checkClient(now)
}

func findListed(resp *kmsg.ListOffsetsResponse, topic string, partition int32) *kmsg.ListOffsetsResponseTopicPartition {
	for i := range resp.Topics {
		if resp.Topics[i].Topic != topic {
			continue
		}
		for j := range resp.Topics[i].Partitions {
			if p := &resp.Topics[i].Partitions[j]; p.Partition == partition {
				return p
			}
		}
	}
	return nil
}

// duplicateListed is the partitions a ListOffsets names more than once
// (nil when none).
func duplicateListed(req *kmsg.ListOffsetsRequest) map[partKey]struct{} {
	var seen seenParts
	var dups map[partKey]struct{}
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			if seen.again(rt.Topic, rp.Partition) {
				if dups == nil {
					dups = map[partKey]struct{}{}
				}
				dups[partKey{topic: rt.Topic, partition: rp.Partition}] = struct{}{}
			}
		}
	}
	return dups
}
