package kafkaproto

// Behavior: OffsetFetch of a group from a client that has no member in it
// and names none — Kafka's admin read of a group's offsets (kadm
// FetchOffsets, KafkaJS admin.fetchOffsets, lag exporters, the
// kafka-consumer-groups tool). Kafka allows it to a principal with
// Describe on the group; here to a client credential or IdP identity
// that may join the group (conn.groupAllowed, checked before), which
// could join and read the same offsets as a member. The offsets are the
// coordinator's committed ones (GET /v1/groups/{g}/committed), read with
// the connection's own token — never the admin token — so the
// coordinator decides again. Partitions without a commit answer -1; all
// topics (a nil topic list) answer every committed partition. The
// coordinator unreachable, or the connection's holder holding its cap of
// answers not yet written (answerRoom): COORDINATOR_LOAD_IN_PROGRESS (retriable), never
// -1, which would have a client apply its reset policy to a partition
// that has a commit; the credential refused there:
// GROUP_AUTHORIZATION_FAILED.

import (
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/client/session"
)

// fetchCommittedOffsets fills out (group and authorization set) from the
// coordinator's committed offsets, read once per request however often
// the group is named (f.committed), within the request's context.
func (c *conn) fetchCommittedOffsets(f *offsetFetch, out kmsg.OffsetFetchResponseGroup, all bool, wanted map[string][]int32) kmsg.OffsetFetchResponseGroup {
	read, ok := f.committed[out.Group]
	if !ok && !c.answerRoom() {
		out.ErrorCode = kerr.CoordinatorLoadInProgress.Code // retriable, as an unreachable coordinator
		return out
	}
	if !ok {
		read.resp, read.err = tenantGroupsOf(c.s).committed(f.ctx, c.principal.Token, out.Group)
		f.committed[out.Group] = read
	}
	resp, err := read.resp, read.err
	if read.tooMany {
		f.refuse(fmt.Sprintf("over %d partitions to answer", offsetFetchPartitionsMax))
		out.ErrorCode = kerr.InvalidRequest.Code
		return out
	}
	if err != nil {
		code := client.CodeOf(err)
		out.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		if !api.IsRetriable(code) {
			out.ErrorCode = kerr.GroupAuthorizationFailed.Code
		}
		if !ok {
			f.unavailable(fmt.Errorf("group %q without a member: %w", out.Group, err))
		}
		return out
	}
	if all && len(resp.Offsets) > f.left {
		// Refused before the answer is built; a repeat is refused from the
		// cache without holding the offsets.
		f.committed[out.Group] = committedRead{tooMany: true}
		f.refuse(fmt.Sprintf("over %d partitions to answer", offsetFetchPartitionsMax))
		out.ErrorCode = kerr.InvalidRequest.Code
		return out
	}
	stored := make(map[session.Partition]api.CommittedOffset, len(resp.Offsets))
	for _, o := range resp.Offsets {
		p := session.Partition{Topic: o.Topic, Partition: o.Partition}
		if _, seen := stored[p]; !seen && all {
			wanted[o.Topic] = append(wanted[o.Topic], o.Partition)
		}
		stored[p] = o
	}
	for _, topic := range slices.Sorted(maps.Keys(wanted)) {
		rt := kmsg.NewOffsetFetchResponseGroupTopic()
		rt.Topic = topic
		for _, p := range wanted[topic] {
			rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
			rp.Partition, rp.LeaderEpoch, rp.Offset, rp.Metadata = p, -1, -1, kmsg.StringPtr("")
			if o, ok := stored[session.Partition{Topic: topic, Partition: p}]; ok {
				rp.Offset, rp.Metadata = o.Offset, kmsg.StringPtr(o.Metadata)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		out.Topics = append(out.Topics, rt)
	}
	return out
}
