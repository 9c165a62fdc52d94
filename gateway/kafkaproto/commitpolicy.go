package kafkaproto

// Behavior: an OffsetCommit capgate refuses by policy, not by fault.
//
//   - capgate never moves a committed offset back by a commit (ARCHITECTURE
//     invariant 9; docs/protocol.md): a member's OffsetCommit below the
//     offset it (or the member it took the partition over from) committed
//     is refused — KafkaJS's admin.resetOffsets / setOffsets backwards
//     (which commit through a member of their own, the earliest and latest
//     sentinels -2 and -1 included), a client seeking back and committing.
//   - Kafka's admin commit — an OffsetCommit naming no member and no
//     generation (-1), as kadm's CommitOffsets, the Java Admin's
//     alterConsumerGroupOffsets and so kafka-consumer-groups
//     --reset-offsets send — is refused whatever its offset: capgate
//     commits only with a member's capability; an administrator places a
//     group with the admin API. Kafka checks the topic first (as for any
//     commit: commitPartitionError), so a topic the connection may not see
//     still answers TOPIC_AUTHORIZATION_FAILED and a missing partition
//     UNKNOWN_TOPIC_OR_PARTITION.
//   - Both answer POLICY_VIOLATION (44) on the partition (errors.go says why
//     that code) and are logged at INFO — no operator fault, but the
//     client's own error does not say what to do: one line per refused
//     partition naming the group, the partition, the committed offset (a
//     member's; an admin commit's is not read), the refused one and the
//     command that does move it: `capgate admin offsets reset GROUP TOPIC
//     PARTITION --to earliest|latest|OFFSET`. Lines are bounded as
//     refusallog's (a burst of commitPolicyBurst, then one a second, the
//     rest counted as suppressed on the next line), and carry the
//     connection's identity (kind, subject, jti), never its token.

import (
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/capgate/capgate/internal/refusallog"
)

// The bound of the commit-policy log: bursts of commitPolicyBurst lines
// (a 12-partition reset logs every partition), then one line a second.
const (
	commitPolicyBurst     = 16
	commitPolicyPerSecond = 1
)

// commitPolicyLog logs commits refused by policy within its bound (at
// info: no operator fault). Safe for concurrent use.
type commitPolicyLog struct{ lines *refusallog.Log }

func newCommitPolicyLog(log *zap.Logger) *commitPolicyLog {
	return &commitPolicyLog{lines: refusallog.NewBounded(log, zap.InfoLevel, commitPolicyPerSecond, commitPolicyBurst)}
}

// refusedCommit is one partition's commit refused by policy.
type refusedCommit struct {
	group     string
	topic     string
	partition int32
	offset    int64 // refused
	committed int64 // the member's committed offset; ignored when admin
	admin     bool  // Kafka's admin commit (no member, no generation)
}

// refused logs r, with the connection's fields (no secret).
func (l *commitPolicyLog) refused(r refusedCommit, conn []zap.Field, now time.Time) {
	msg := "kafka OffsetCommit refused: capgate never moves a committed offset back by a commit"
	fields := append(conn, zap.String("group", r.group), zap.String("topic", r.topic), zap.Int32("partition", r.partition))
	if r.admin {
		msg = "kafka OffsetCommit without a member refused: capgate commits only for its members, an admin reset goes through capgate's admin API"
	} else {
		fields = append(fields, zap.Int64("committed", r.committed))
	}
	fields = append(fields, zap.Int64("refused_offset", r.offset), zap.String("answer", "POLICY_VIOLATION"),
		zap.String("instead", resetCommand(r.group, r.topic, r.partition, r.offset)))
	l.lines.LineAt(now, msg, fields...)
}

// resetCommand is the CLI command that moves group's committed offset
// of topic/partition where offset asked: Kafka clients' sentinels -2
// and -1 (KafkaJS's resetOffsets earliest and latest) are --to earliest
// and latest.
func resetCommand(group, topic string, partition int32, offset int64) string {
	to := "earliest|latest|OFFSET"
	switch {
	case offset == -2:
		to = "earliest"
	case offset == -1:
		to = "latest"
	case offset >= 0:
		to = strconv.FormatInt(offset, 10)
	}
	return "capgate admin offsets reset " + group + " " + topic + " " + strconv.Itoa(int(partition)) + " --to " + to
}
