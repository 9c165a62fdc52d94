package coordinator

import "github.com/capgate/capgate/api"

// JSON bodies of the admin routes (DESIGN §5). Durations are *_ms, times
// RFC 3339. (They live here until the admin CLI needs them in api.)

// GroupsResponse is GET /v1/admin/groups: names sorted, one page;
// NextAfter, when set, is the after= of the next page.
type GroupsResponse struct {
	Groups    []string `json:"groups"`
	NextAfter string   `json:"next_after,omitempty"`
	// Summaries, with ?summaries=true: each listed group's summary, in
	// the names' order.
	Summaries []GroupSummary `json:"summaries,omitempty"`
}

// GroupDescription is GET /v1/admin/groups/{g}: one page of members and
// partitions; NextMembersAfter / NextPartitionsAfter, when set, are the
// members_after= / partitions_after= of the next page. Creator is the
// tenant whose join created the group (group.Join.Tenant: "oauth:<client_id>"
// for an OAuth client, an IdP identity's id, else the creating client
// credential's jti), counted against limits.groups_per_credential; absent
// for a group an admin made or one recorded before creators were kept.
// CreatorName is the creating credential's name (a client credential's
// name, an IdP identity's subject; at most 255 bytes), kept with the
// group; absent when it would only repeat creator (an OAuth client), and
// for groups created before names were kept.
type GroupDescription struct {
	Group               string          `json:"group"`
	Creator             string          `json:"creator,omitempty"`
	CreatorName         string          `json:"creator_name,omitempty"`
	Config              GroupConfigView `json:"config"`
	MovesHeldBack       int             `json:"moves_held_back,omitempty"`
	Members             []MemberView    `json:"members"`
	Partitions          []PartitionView `json:"partitions"`
	NextMembersAfter    string          `json:"next_members_after,omitempty"`
	NextPartitionsAfter string          `json:"next_partitions_after,omitempty"`
}

// GroupSummary is GET /v1/admin/groups/{g}/summary: a group's counts,
// without a describe's members and partitions — all its members and
// partitions (a describe's page holds at most describe_page_max), its
// partitions by state, and Lag, the sum of its partitions' lags as a
// describe shows them (absent over describe_lag_max partitions, or when
// Kafka answered for none).
type GroupSummary struct {
	Group         string          `json:"group"`
	Config        GroupConfigView `json:"config"`
	MovesHeldBack int             `json:"moves_held_back,omitempty"`
	Members       int             `json:"members"`
	Partitions    int             `json:"partitions"`
	Owned         int             `json:"owned"`
	Revoking      int             `json:"revoking"`
	Unowned       int             `json:"unowned"`
	Lag           *int64          `json:"lag,omitempty"`
}

// GroupConfigView is a group's configuration; also the answer of PUT
// /v1/admin/groups/{g}/config.
type GroupConfigView struct {
	Assignor          string `json:"assignor"`
	SessionTimeoutMs  int64  `json:"session_timeout_ms"`
	HandoffTimeoutMs  int64  `json:"handoff_timeout_ms"`
	MaxMovesPerSecond int    `json:"max_moves_per_second"`
	OffsetReset       string `json:"offset_reset"`
}

// MemberView is one live member. Credential is what opened it (and what
// an admin denies to end it); client_id is only what the member chose.
// TopicPatternMatches is how many topics TopicPattern matches now, as the
// join's answer counts them — a stale member's, those it still follows
// (absent without a pattern or before the first metadata read).
// TopicPatternStale says why a pattern member follows no new topic
// (group.MemberDescription.TopicPatternStale).
type MemberView struct {
	ID                  string          `json:"id"`
	InstanceID          string          `json:"instance_id,omitempty"`
	ClientID            string          `json:"client_id,omitempty"`
	Credential          *CredentialView `json:"credential,omitempty"`
	Topics              []string        `json:"topics,omitempty"`
	TopicPattern        string          `json:"topic_pattern,omitempty"`
	TopicPatternMatches *int            `json:"topic_pattern_matches,omitempty"`
	TopicPatternStale   string          `json:"topic_pattern_stale,omitempty"`
	SessionTimeoutMs    int64           `json:"session_timeout_ms"`
	LastContact         string          `json:"last_contact"`
	Partitions          int             `json:"partitions"`
}

// CredentialView is the credential a member is bound to: id is a client
// credential's jti (POST /v1/admin/capabilities/{id}/revoke ends every
// member it opened), issuer and subject its iss and sub.
type CredentialView struct {
	ID      string `json:"id"`
	Issuer  string `json:"issuer,omitempty"`
	Subject string `json:"subject,omitempty"`
}

// PartitionView is one partition of a group. Committed is absent when
// nothing was committed; LatestOffset and Lag when Kafka did not answer
// (or the group has more than describe_lag_max partitions).
type PartitionView struct {
	Topic               string     `json:"topic"`
	Partition           int32      `json:"partition"`
	Epoch               uint64     `json:"epoch"`
	State               string     `json:"state"`
	Owner               string     `json:"owner,omitempty"`
	OwnerOutside        bool       `json:"owner_outside,omitempty"`
	OwnerEpoch          uint64     `json:"owner_epoch,omitempty"`
	Target              string     `json:"target,omitempty"`
	TargetOutside       bool       `json:"target_outside,omitempty"`
	CapabilityExpiresAt string     `json:"capability_expires_at,omitempty"`
	RevokeStarted       string     `json:"revoke_started,omitempty"`
	GatewaysSafe        bool       `json:"gateways_safe,omitempty"`
	Released            bool       `json:"released,omitempty"`
	Committed           *int64     `json:"committed,omitempty"`
	Metadata            string     `json:"metadata,omitempty"`
	LatestOffset        *int64     `json:"latest_offset,omitempty"`
	Lag                 *int64     `json:"lag,omitempty"`
	Lease               *LeaseView `json:"lease,omitempty"`
}

// LeaseView is an admin lease on a partition.
type LeaseView struct {
	Holder  string `json:"holder"`
	Outside bool   `json:"outside,omitempty"`
	Until   string `json:"until"`
}

// GatewaysResponse is GET /v1/admin/gateways.
type GatewaysResponse struct {
	Seq uint64 `json:"seq"`
	// SilentGateways is groups.silent_gateways: "fence" (a silent gateway
	// refuses fetches itself and counts safe for every fence) or "serve"
	// (it keeps serving, and silence never makes it safe).
	SilentGateways string        `json:"silent_gateways"`
	Gateways       []GatewayView `json:"gateways"`
}

// GatewayView is one gateway: what it acknowledged, how far behind that
// is, when it last polled; Lagging: it polls but has not acknowledged a
// sync entry appended more than gateway_timeout ago (with
// silent_gateways fence it counts safe for those fences, as a silent
// one); UnackedSince: the oldest entry it has not acknowledged was
// appended then or earlier (empty when it acknowledged everything);
// Conflicts: polls and leaves of another gateway process refused under
// this id (two gateways configured with one gateway.id), the last at
// LastConflict.
type GatewayView struct {
	ID           string `json:"id"`
	Acked        uint64 `json:"acked_seq"`
	Lag          uint64 `json:"lag"`
	LastSeen     string `json:"last_seen"`
	Silent       bool   `json:"silent,omitempty"`
	Lagging      bool   `json:"lagging,omitempty"`
	UnackedSince string `json:"unacked_since,omitempty"`
	Conflicts    uint64 `json:"conflicts,omitempty"`
	LastConflict string `json:"last_conflict,omitempty"`
}

// RevokeRequest is POST /v1/admin/groups/{g}/partitions/{t}/{p}/revoke.
type RevokeRequest struct {
	Reason string `json:"reason,omitempty"`
}

// RevokeResponse answers a partition revoke once every gateway is safe for
// the fence at Epoch.
type RevokeResponse struct {
	Group     string `json:"group"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Epoch     uint64 `json:"epoch"`
}

// LeaseRequest is POST /v1/admin/groups/{g}/partitions/{t}/{p}/lease.
type LeaseRequest struct {
	Holder string `json:"holder"`
	TTLMs  int64  `json:"ttl_ms"`
	// Force moves a lease in force to another holder (409 conflict
	// without it).
	Force bool `json:"force,omitempty"`
}

// LeaseResponse answers a lease once the holder is granted. An outside
// holder (not a member) gets its capability here; a member gets it in its
// heartbeat too.
type LeaseResponse struct {
	Group      string `json:"group"`
	Topic      string `json:"topic"`
	Partition  int32  `json:"partition"`
	Holder     string `json:"holder"`
	Outside    bool   `json:"outside"`
	Epoch      uint64 `json:"epoch"`
	Offset     int64  `json:"offset"`
	Until      string `json:"until"`
	Capability string `json:"capability,omitempty"`
	JTI        string `json:"jti,omitempty"`
	ExpiresAt  string `json:"expires_at,omitempty"`
}

// OffsetResetRequest is PUT /v1/admin/groups/{g}/partitions/{t}/{p}/offset:
// the explicit Offset, or To "earliest" / "latest" (the partition's log
// start or end, read from Kafka at once; Offset must then be 0). Force
// resets a partition leased to an outside holder, ending the lease
// (without it: 409 conflict).
type OffsetResetRequest struct {
	Offset   int64  `json:"offset"`
	To       string `json:"to,omitempty"`
	Metadata string `json:"metadata,omitempty"`
	Force    bool   `json:"force,omitempty"`
}

// OffsetResetResponse answers an offset reset with the offset now
// committed; LeaseEnded is the outside lease a forced reset ended.
type OffsetResetResponse struct {
	Group      string     `json:"group"`
	Topic      string     `json:"topic"`
	Partition  int32      `json:"partition"`
	Offset     int64      `json:"offset"`
	LeaseEnded *LeaseView `json:"lease_ended,omitempty"`
}

// GroupDeleteResponse answers DELETE /v1/admin/groups/{g}.
type GroupDeleteResponse struct {
	Group          string `json:"group"`
	MembersRevoked int    `json:"members_revoked"`
	LeasesEnded    int    `json:"leases_ended"`
	OffsetsDeleted int    `json:"offsets_deleted"`
}

// SharedGrantRequest is POST /v1/admin/capabilities: a non-exclusive
// capability fenced by its jti only. Ops default to ["fetch"].
type SharedGrantRequest struct {
	Topic      string   `json:"topic"`
	Partition  int32    `json:"partition"`
	Ops        []string `json:"ops,omitempty"`
	TTLMs      int64    `json:"ttl_ms"`
	Holder     string   `json:"holder"`
	OffsetFrom *int64   `json:"offset_from,omitempty"`
	OffsetTo   *int64   `json:"offset_to,omitempty"`
}

// DenyRequest is POST /v1/admin/capabilities/{jti}/revoke. Exp (unix
// seconds) is the token's exp, at most now + the longest token lifetime
// (the longest of max_lease, member_token_ttl, client_credential_ttl_max;
// later is refused with 400); without it the jti is denied that long,
// which outlives any token.
type DenyRequest struct {
	Exp    int64  `json:"exp,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// DenyResponse answers a jti revoke.
type DenyResponse struct {
	JTI string `json:"jti"`
	Exp int64  `json:"exp"`
}

// MemberRevokeResponse answers POST /v1/admin/groups/{g}/members/{id}/revoke.
// AlreadyRevoked: the member had been revoked before this request and
// its revocation still runs (until Until) — a repeat of a revoke whose
// answer was lost, or a member whose credential was denied —; nothing
// was done (Fenced 0).
type MemberRevokeResponse struct {
	Group          string `json:"group"`
	MemberID       string `json:"member_id"`
	Until          string `json:"until"`
	Fenced         int    `json:"fenced"`
	AlreadyRevoked bool   `json:"already_revoked"`
}

// QoSRequest is PUT /v1/admin/qos. ID defaults to a digest of the
// selector, so a second PUT for the same selector updates the first: the
// fields it sets replace the earlier ones, the ones it leaves out (absent,
// or "" for log_level and monitor) are kept; ttl_ms always starts anew.
// max_bytes_per_sec 0 removes a rate.
type QoSRequest struct {
	ID             string          `json:"id,omitempty"`
	Selector       api.QoSSelector `json:"selector"`
	LogLevel       string          `json:"log_level,omitempty"`
	Monitor        string          `json:"monitor,omitempty"`
	MaxBytesPerSec *int64          `json:"max_bytes_per_sec,omitempty"`
	TTLMs          int64           `json:"ttl_ms"`
	// Clear names fields of the override to empty: "log_level", "monitor"
	// (an empty log_level or monitor keeps the earlier value; a byte rate
	// is lifted with max_bytes_per_sec 0).
	Clear []string `json:"clear,omitempty"`
}

// QoSListResponse is GET /v1/admin/qos.
type QoSListResponse struct {
	Overrides []api.QoSOverride `json:"overrides"`
}

// GroupConfigRequest is PUT /v1/admin/groups/{g}/config; absent fields are
// unchanged.
type GroupConfigRequest struct {
	Assignor          *string `json:"assignor,omitempty"`
	SessionTimeoutMs  *int64  `json:"session_timeout_ms,omitempty"`
	HandoffTimeoutMs  *int64  `json:"handoff_timeout_ms,omitempty"`
	MaxMovesPerSecond *int    `json:"max_moves_per_second,omitempty"`
	OffsetReset       *string `json:"offset_reset,omitempty"`
}

// ClientRequest is POST /v1/admin/clients: a client credential that may
// join Groups and subscribe to Topics ("*" = any) for TTLMs, allowed Ops
// (consume, produce; absent or empty: consume only).
type ClientRequest struct {
	Name   string   `json:"name"`
	Groups []string `json:"groups"`
	Topics []string `json:"topics"`
	Ops    []string `json:"ops,omitempty"`
	TTLMs  int64    `json:"ttl_ms"`
}

// ClientResponse carries a client credential and the ops it allows.
type ClientResponse struct {
	Credential string   `json:"client_credential"`
	JTI        string   `json:"jti"`
	Ops        []string `json:"ops"`
	ExpiresAt  string   `json:"expires_at"`
}

// KeysResponse answers POST /v1/admin/keys/rotate with the ring's key ids.
type KeysResponse struct {
	Current  string `json:"current"`
	Next     string `json:"next"`
	Previous string `json:"previous,omitempty"`
}
