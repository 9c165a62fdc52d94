package kafkaproto

import (
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/capgate/capgate/api"
)

// The error table of the Kafka boundary: every capgate refusal (api.Code,
// the gateway's one reject table) becomes one Kafka error code, chosen by
// how real clients (kgo, KafkaJS, librdkafka/kcat) react to it — see
// ARCHITECTURE.md "Kafka listener: error mapping" for what each did in the
// e2e tests.
//
// Per partition of a Fetch (and Produce, ListOffsets):
//
//	capgate code                          Kafka error                      why
//	capability_revoked, token_expired     NOT_LEADER_OR_FOLLOWER (6)       retriable everywhere: clients refresh
//	                                                                       metadata and retry; a group member
//	                                                                       meanwhile learns its new assignment
//	capability_revoked of an assign-mode  TOPIC_AUTHORIZATION_FAILED (29)  final: its own capability was denied
//	connection's own capability                                            or fenced (conn.partitionError)
//	not_ready, out_of_sync, unavailable,  LEADER_NOT_AVAILABLE (5)         retriable: the gateway cannot vouch
//	broker_error                                                           for its view or reach Kafka right now
//	forbidden, unauthorized               TOPIC_AUTHORIZATION_FAILED (29)  final: the token never covers it;
//	                                                                       clients report it to the user
//	not_found                             UNKNOWN_TOPIC_OR_PARTITION (3)
//	rate_limited                          none: the partition is empty and ThrottleMillis says how long to wait
var partitionErrors = map[api.Code]*kerr.Error{
	api.CodeCapabilityRevoked: kerr.NotLeaderForPartition,
	api.CodeTokenExpired:      kerr.NotLeaderForPartition,
	api.CodeNotReady:          kerr.LeaderNotAvailable,
	api.CodeOutOfSync:         kerr.LeaderNotAvailable,
	api.CodeUnavailable:       kerr.LeaderNotAvailable,
	api.CodeBrokerError:       kerr.LeaderNotAvailable,
	api.CodeForbidden:         kerr.TopicAuthorizationFailed,
	api.CodeUnauthorized:      kerr.TopicAuthorizationFailed,
	api.CodeNotFound:          kerr.UnknownTopicOrPartition,
}

// partitionError is the Kafka error code for a partition refused with
// code; unknown codes are UNKNOWN_SERVER_ERROR.
func partitionError(code api.Code) int16 {
	if e, ok := partitionErrors[code]; ok {
		return e.Code
	}
	return kerr.UnknownServerError.Code
}

// partitionError is the Kafka error code for a partition this connection
// is refused with code. On an assign-mode connection the capability is
// the connection's own: its deny or a newer epoch (capability_revoked)
// is final — no new assignment will come to it, and the token cannot be
// swapped for another — so it is TOPIC_AUTHORIZATION_FAILED, which
// clients report, not NOT_LEADER_OR_FOLLOWER, which they retried
// silently until the session ended (up to max_lease). A group member's
// fenced capability keeps NOT_LEADER_OR_FOLLOWER: its new assignment is
// on its way.
func (c *conn) partitionError(code api.Code) int16 {
	if code == api.CodeCapabilityRevoked && c.principal.capability() {
		return kerr.TopicAuthorizationFailed.Code
	}
	return partitionError(code)
}

// The group errors (OffsetCommit per partition, heartbeats, joins).
//
//	capgate code            classic protocol              KIP-848
//	stale_epoch,            ILLEGAL_GENERATION (22)       STALE_MEMBER_EPOCH (113)   the member rejoins
//	capability_revoked
//	unknown_member          UNKNOWN_MEMBER_ID (25)        UNKNOWN_MEMBER_ID (25)     the member rejoins, new id
//	forbidden               GROUP_AUTHORIZATION_FAILED (30) or TOPIC_AUTHORIZATION_FAILED (29)
//	offset_out_of_range     OFFSET_OUT_OF_RANGE (1): capgate refuses a commit beyond the log end
//	offset_regression       POLICY_VIOLATION (44): capgate never moves a committed offset back by a
//	                        commit (Kafka would); the client sees its rewind refused rather than
//	                        lost, the gateway logs what to run instead (commitpolicy.go). Kafka's
//	                        admin commit (no member) gets it too, whatever its offset.
//	limit_exceeded          GROUP_MAX_SIZE_REACHED (81) on a join: kafka_max_members, or the
//	                        coordinator's join limits (members_per_group...); final, reported
//	retriable codes         COORDINATOR_NOT_AVAILABLE (15)                           the client retries
//
// A committed partition refused as not the member's (ILLEGAL_GENERATION,
// STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID) is first checked as Kafka checks
// it before any group check (conn.commitPartitionError): a topic the
// connection may not see is TOPIC_AUTHORIZATION_FAILED (29), a partition
// or topic that does not exist UNKNOWN_TOPIC_OR_PARTITION (3).
//
// The connection's own client credential denied or expired
// (conn.checkClient) is final: GROUP_AUTHORIZATION_FAILED on group APIs,
// TOPIC_AUTHORIZATION_FAILED on Produce and ListOffsets.
func commitError(code api.Code, kip848 bool) int16 {
	switch code {
	case "":
		return 0
	case api.CodeStaleEpoch, api.CodeCapabilityRevoked, api.CodeTokenExpired:
		if kip848 {
			return kerr.StaleMemberEpoch.Code
		}
		return kerr.IllegalGeneration.Code
	case api.CodeUnknownMember:
		return kerr.UnknownMemberID.Code
	case api.CodeForbidden, api.CodeUnauthorized:
		return kerr.TopicAuthorizationFailed.Code
	case api.CodeOffsetRegression:
		// A refusal by capgate's policy, final: POLICY_VIOLATION ("Request
		// parameters do not satisfy the configured policy") is the one
		// code whose text says so, and it is non-retriable in kgo (kerr),
		// KafkaJS (protocol/error.js) and librdkafka (not in its
		// OffsetCommit retry table: permanent), so no client repeats the
		// commit. INVALID_COMMIT_OFFSET_SIZE, answered before, is as final
		// but reads as a malformed commit ("The committing offset data
		// size is not valid"); OFFSET_METADATA_TOO_LARGE blames the
		// metadata; GROUP_AUTHORIZATION_FAILED says the credential may not
		// use the group — it may (forward commits work), and the Java
		// consumer and librdkafka treat it as a missing ACL.
		return kerr.PolicyViolation.Code
	case api.CodeOffsetOutOfRange:
		return kerr.OffsetOutOfRange.Code
	case api.CodeLimitExceeded:
		// A commit is refused limit_exceeded only when its metadata would
		// take the coordinator's group state past state_bytes: Kafka's
		// nearest is the metadata refusal, final and reported (not
		// UNKNOWN_SERVER_ERROR, which reads as a fault).
		return kerr.OffsetMetadataTooLarge.Code
	}
	if api.IsRetriable(code) {
		return kerr.CoordinatorNotAvailable.Code
	}
	return kerr.UnknownServerError.Code
}
