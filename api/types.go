package api

// Grant hands one partition's capability to a holder. Renewals use the same
// shape with the same epoch and a later expiry.
type Grant struct {
	Topic      string `json:"topic"`
	Partition  int32  `json:"partition"`
	Epoch      uint64 `json:"epoch"`
	Offset     int64  `json:"offset"` // where to start: committed offset, or offset_reset
	Capability string `json:"capability"`
	ExpiresAt  string `json:"expires_at"` // RFC 3339
	// OffsetReset is set when nothing was committed: the group's
	// offset_reset ("earliest" or "latest") chose Offset. Empty: Offset is
	// the committed offset. The Kafka listener answers OffsetFetch -1 for
	// such a partition, so the Kafka client applies its own reset policy.
	OffsetReset string `json:"offset_reset,omitempty"`
}

// PartitionRef names one partition of a group at an epoch.
type PartitionRef struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Epoch     uint64 `json:"epoch"`
}

// JoinRequest is POST /v1/groups/{group}/join.
//
// RenewToken renews a live member in place (a credential renewal): the
// member's current member token, with member_id = its sub, the bearer
// a client credential or IdP token the member is bound to (the same
// credential, or a refreshed token of the same identity) and the
// member's own subscription. The member keeps its id, partitions and
// epochs — no fence, nothing in the group moves — and the answer is a
// new member token with the capabilities the member holds, renewed.
//
// RenewCredential, with RenewToken, is the credential the member is
// bound to when the bearer is another of the same issuer and name (an
// admin-minted client credential renewed by a new one): presenting both
// proves one holder, and the member is rebound to the bearer. One that
// does not verify, is denied or expired, or names another holder proves
// nothing (then the bearer must be bound to the member, as without it).
type JoinRequest struct {
	MemberID         string   `json:"member_id,omitempty"`
	RenewToken       string   `json:"renew_token,omitempty"`
	RenewCredential  string   `json:"renew_credential,omitempty"`
	InstanceID       string   `json:"instance_id,omitempty"`
	ClientID         string   `json:"client_id,omitempty"`
	Topics           []string `json:"topics,omitempty"`
	TopicPattern     string   `json:"topic_pattern,omitempty"`
	SessionTimeoutMs int64    `json:"session_timeout_ms,omitempty"`
	Assignor         string   `json:"assignor,omitempty"`
}

// JoinResponse answers a join. TopicPatternMatches is set for a
// topic_pattern join once the coordinator has read topic metadata: how
// many topics the pattern matched then (its whole name; internal topics
// never). 0 means the member holds nothing until a matching topic is
// created — the SDK warns (a '^orders-' meant as a prefix matches nothing).
type JoinResponse struct {
	MemberID            string  `json:"member_id"`
	MemberToken         string  `json:"member_token"`
	SessionTimeoutMs    int64   `json:"session_timeout_ms"`
	HeartbeatWaitMs     int64   `json:"heartbeat_wait_ms"`
	Grants              []Grant `json:"grants"`
	TopicPatternMatches *int    `json:"topic_pattern_matches,omitempty"`
}

// HeartbeatRequest is POST /v1/groups/{group}/heartbeat; the coordinator
// holds it up to WaitMs (capped by heartbeat_wait) until it has news. A
// zero WaitMs is left out (omitempty), which means heartbeat_wait; a raw
// {"wait_ms":0} is answered at once.
//
// Resync: set it on the first heartbeat after one whose answer did not
// arrive (no answer, a timeout, a 5xx). The coordinator may have decided
// that lost answer (its grants, renewals and revokes count as delivered),
// so this answer carries, at once, every partition the member owns as a
// renewal (same epoch, fresh capability) and every revoke it has not
// released. A flag, not the member's held epochs: the coordinator is the
// only authority on what the member owns, the answer is bounded by that
// (as a join's is), and a flag costs nothing on the ordinary heartbeat.
type HeartbeatRequest struct {
	WaitMs int64 `json:"wait_ms,omitempty"`
	Resync bool  `json:"resync,omitempty"`
}

// HeartbeatResponse carries the member's news. All lists may be empty.
type HeartbeatResponse struct {
	Revoke []PartitionRef `json:"revoke"`
	Grants []Grant        `json:"grants"`
	Renew  []Grant        `json:"renew"`
}

// CommitOffset is one partition's offset in a commit.
type CommitOffset struct {
	Topic      string `json:"topic"`
	Partition  int32  `json:"partition"`
	Offset     int64  `json:"offset"`
	Metadata   string `json:"metadata,omitempty"`
	Capability string `json:"capability"`
}

// CommitRequest is POST /v1/groups/{group}/commit; Release:true is the
// PartitionCommitted notice for those partitions.
type CommitRequest struct {
	Offsets []CommitOffset `json:"offsets"`
	Release bool           `json:"release,omitempty"`
}

// CommitResponse lists what was accepted.
type CommitResponse struct {
	Committed []CommittedOffset `json:"committed"`
}

// CommittedOffset is a committed offset as reported by the coordinator.
type CommittedOffset struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Metadata  string `json:"metadata,omitempty"`
}

// LeaveRequest is POST /v1/groups/{group}/leave.
type LeaveRequest struct {
	Offsets []CommitOffset `json:"offsets,omitempty"`
}

// OffsetsResponse is GET /v1/groups/{group}/offsets.
type OffsetsResponse struct {
	Offsets []CommittedOffset `json:"offsets"`
}

// AttenuateRequest is POST /v1/capabilities/attenuate (parent as bearer).
// Zero values keep the parent's setting.
type AttenuateRequest struct {
	Ops            []string `json:"ops,omitempty"`
	OffsetFrom     *int64   `json:"offset_from,omitempty"`
	OffsetTo       *int64   `json:"offset_to,omitempty"`
	TTLMs          int64    `json:"ttl_ms,omitempty"`
	MaxBytesPerSec int64    `json:"max_bytes_per_sec,omitempty"`
}

// CapabilityResponse returns one minted capability. Partitions is the
// topic's partition count when the coordinator knows it (admin grants):
// what a producer partitions keys over.
type CapabilityResponse struct {
	Capability string `json:"capability"`
	JTI        string `json:"jti"`
	ExpiresAt  string `json:"expires_at"`
	Partitions int32  `json:"partitions,omitempty"`
}
