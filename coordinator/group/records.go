package group

import (
	"time"

	"github.com/capgate/capgate/api"
)

// Record is one durable write in Ready.Persist. Each kind has a natural
// key (listed per type); a later record with the same key replaces the
// earlier one, and Deleted removes the key. Within one Ready a key appears
// at most once. Write a Ready's records in one synchronous transaction.
type Record interface{ isRecord() }

// PartitionState is the ownership state of a partition.
type PartitionState string

// The partition states of DESIGN §4.
const (
	Unowned  PartitionState = "unowned"
	Owned    PartitionState = "owned"
	Revoking PartitionState = "revoking"
)

// PartitionRecord is a partition's epoch and ownership.
// Key: Group, Topic, Partition. Never deleted (epochs are never reused).
type PartitionRecord struct {
	Group     string
	Topic     string
	Partition int32
	// Epoch is the highest epoch ever fenced or granted.
	Epoch uint64
	State PartitionState
	// Holder holds a capability at HolderEpoch: the owner, or the member
	// (or outside holder) being revoked from.
	Holder        string
	HolderOutside bool
	HolderEpoch   uint64
	// Target is who a revoking partition goes to ("" = nobody yet).
	Target        string
	TargetOutside bool
	RevokeStarted time.Time
	Released      bool
	// Forced: the holder's commits are refused (admin offset reset).
	Forced bool
	// Forgotten: the partition's group was reaped; the store forgets its
	// epoch and state and raises its epoch floor to Epoch.
	Forgotten bool
}

// OffsetRecord is a committed offset. Key: Group, Topic, Partition.
type OffsetRecord struct {
	Group     string
	Topic     string
	Partition int32
	Offset    int64
	Metadata  string
	// Epoch is the epoch of the capability that committed it, or that
	// released the partition without an offset after (0: an admin
	// reset, or unknown): a commit or release repeated at that epoch
	// after the partition moved on is answered as the one it repeats
	// (commit.go's landed). The stores keep it already
	// (store.CommittedOffset.Epoch).
	Epoch uint64
	// Kept: nothing was committed — a release without an offset left
	// this one standing, and only Epoch is new (keepOffset). Observers
	// that report commits (the Kafka mirror, the timeline) skip it.
	Kept bool
}

// MemberRecord is a group member. Key: Group, MemberID.
type MemberRecord struct {
	Group          string
	MemberID       string
	InstanceID     string
	ClientID       string
	Topics         []string
	TopicPattern   string
	SessionTimeout time.Duration
	// Credential is what the member is bound to.
	Credential Credential
	Deleted    bool
}

// GroupRecord is a group's configuration. Key: Group. Deleted when the
// group is reaped.
type GroupRecord struct {
	Group  string
	Config GroupConfig
	// Creator is the tenant whose join created the group (Join.Tenant:
	// an OAuth client's "oauth:<client_id>", an IdP identity's id, else a
	// credential's jti — which is also what a record written before
	// tenants were kept names); "" (an admin's group, a deleted one, or
	// one recorded before creators were kept) counts for nobody.
	Creator string
	// CreatorName is the creating credential's name (Join.creatorName;
	// "" when none is kept, and in records written before names were).
	CreatorName string
	Deleted     bool
}

// LeaseRecord is an admin lease (pin). Key: Group, Topic, Partition.
type LeaseRecord struct {
	Group     string
	Topic     string
	Partition int32
	Holder    string
	Outside   bool
	Until     time.Time
	Deleted   bool
}

// DeniedRecord is a denied capability id. Key: JTI.
type DeniedRecord struct {
	Denied  api.Denied
	Deleted bool
}

// RevokedMemberRecord is a revoked member. Key: Group, MemberID.
type RevokedMemberRecord struct {
	RevokedMember api.RevokedMember
	Deleted       bool
}

// QoSRecord is a QoS override. Key: Override.ID.
type QoSRecord struct {
	Override api.QoSOverride
	Deleted  bool
}

// GatewayRecord is a gateway seen at least once; Deleted when it left.
// Key: ID.
type GatewayRecord struct {
	ID      string
	Deleted bool
}

// SyncSeqRecord is the highest sync sequence number handed out. Key: one.
type SyncSeqRecord struct {
	Seq uint64
}

// TopicRecord is topic metadata. Key: Topic.
type TopicRecord struct {
	Topic      string
	Partitions int32
	Deleted    bool
}

func (PartitionRecord) isRecord()     {}
func (OffsetRecord) isRecord()        {}
func (MemberRecord) isRecord()        {}
func (GroupRecord) isRecord()         {}
func (LeaseRecord) isRecord()         {}
func (DeniedRecord) isRecord()        {}
func (RevokedMemberRecord) isRecord() {}
func (QoSRecord) isRecord()           {}
func (GatewayRecord) isRecord()       {}
func (SyncSeqRecord) isRecord()       {}
func (TopicRecord) isRecord()         {}

// Snapshot is the durable state Restore starts from: the latest record of
// every key the shell persisted, deleted keys left out, in any order.
type Snapshot struct {
	Groups         []GroupRecord
	Members        []MemberRecord
	Partitions     []PartitionRecord
	Offsets        []OffsetRecord
	Leases         []LeaseRecord
	Topics         []TopicRecord
	Denied         []api.Denied
	RevokedMembers []api.RevokedMember
	QoS            []api.QoSOverride
	Gateways       []string
	SyncSeq        uint64
	// EpochFloor is the highest epoch of every partition forgotten so
	// far: new partitions start at it.
	EpochFloor uint64
}
