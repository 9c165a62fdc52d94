package kafkaproto

import (
	"fmt"

	"github.com/capgate/capgate/api"
)

// describeAnswerBytesMax bounds the members one DescribeGroups or
// ConsumerGroupDescribe answer carries, over all its groups, in the
// coordinator descriptions' bytes (describedBytes): a group whose
// members would take the answer beyond it answers INVALID_REQUEST
// without them (a group named twice is in the answer twice, and counts
// twice); the first group with members is always answered whole.
// describeGroupsMax bounded only the groups (100), and a description is
// up to the coordinator's describe_bytes_max (4 MiB) of members, so one
// request naming a large group 100 times made the listener build a
// ~400 MB answer for one connection and hold it until a slow reader
// took it (redteam15 #3). OffsetFetch bounds its answer the same way
// (offsetFetchPartitionsMax).
var describeAnswerBytesMax = 16 << 20

// describeCut is the message of a group past describeAnswerBytesMax.
var describeCut = fmt.Sprintf("the answer would carry more than %d bytes of members: describe fewer groups per request", describeAnswerBytesMax)

// describeBudget counts the members' bytes of one answer.
type describeBudget struct{ used int }

// take counts n bytes of a group's members in the answer, or reports
// that they do not fit.
func (b *describeBudget) take(n int) bool {
	if b.used > 0 && b.used+n > describeAnswerBytesMax {
		return false
	}
	b.used += n
	return true
}

// describedBytes estimates what d's members take in a describe answer:
// ids, subscribed topics, and owned partitions (4 bytes each, a topic's
// name once per run of its partitions, as Kafka's assignment encodes
// them).
func describedBytes(d api.TenantGroupDescription) int {
	n := len(d.Group)
	for _, m := range d.Members {
		n += 32 + len(m.MemberID) + len(m.ClientID) + len(m.InstanceID)
		for _, t := range m.Topics {
			n += 2 + len(t)
		}
		last := ""
		for _, p := range m.Owned {
			if p.Topic != last {
				n += 2 + len(p.Topic)
				last = p.Topic
			}
			n += 4
		}
	}
	return n
}

// answerRoom reports whether an admin read (ListGroups, DescribeGroups,
// ConsumerGroupDescribe, an OffsetFetch without a member) may build its
// answer: the connection's holder holds less than
// max_answer_bytes_held_per_holder of answers not yet written (a Fetch's
// records, and every other answer of 16 KiB or more: conn.write), and
// the gateway less than max_answer_bytes_held. Else it answers as a
// coordinator that cannot (retriable), throttled answerRoomThrottle,
// without asking the coordinator. The answers themselves are counted
// whatever they come to (they are sent once built); without this, a
// tenant's admin reads on connections that read slowly held what the
// coordinator's rate lets it build, ~20 MB a second, up to
// write_timeout: ~200 MB (redteam15 #1 at the gateway).
func (c *conn) answerRoom() bool { return c.s.gate.AnswerRoom(c.principal.Claims) == "" }

// answerRoomThrottle is how long a client is asked to wait after an
// admin read refused for the answers held.
const answerRoomThrottle = 1000 // ms
