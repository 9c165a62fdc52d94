package group

import (
	"time"

	"github.com/capgate/capgate/api"
)

// Message is an output of the machine: the reply to the request Ref. The
// shell sends it only after persisting the Ready it came in.
type Message interface {
	// Request is the Ref of the request this message answers.
	Request() Ref
}

// Grant tells the shell to mint one capability: sub=Holder, grp=Group,
// tp/pt=Topic/Partition, ep=Epoch, exp=ExpiresAt exactly (whole seconds;
// never later), iat=now. Outside is true for an admin lease holder that is
// not a group member. Offset is where to start reading: the committed
// offset, or OffsetEarliest/OffsetLatest for the shell to resolve against
// Kafka. A renewal has the same shape with the same Epoch.
type Grant struct {
	Group  string
	Holder string
	// Tenant is who the holder's member counts for (Credential.tenant:
	// an OAuth client, an IdP identity, else the credential id); "" for
	// an outside holder. Its capability carries it (tnt), so gateways
	// bound a tenant's fetches in flight however many capabilities its
	// joins minted.
	Tenant    string
	Outside   bool
	Topic     string
	Partition int32
	Epoch     uint64
	Offset    int64
	ExpiresAt time.Time
	// HeldUntil is the expiry of the capability at this epoch the holder
	// was last handed (zero: none this machine knows of — a new grant,
	// or any partition after a takeover): how urgent a renewal is when
	// the tenant's rate pays for only part of an answer (PaceNews).
	HeldUntil time.Time
}

// JoinReply answers Join. Grants are the partitions the member may read at
// once; more come in heartbeat news.
type JoinReply struct {
	Ref      Ref
	Group    string
	MemberID string
	// Created: this join made the member (not a rejoin by member id, nor
	// a repeat of a keyed join that found its member: Join.JoinKey).
	Created        bool
	SessionTimeout time.Duration
	HeartbeatWait  time.Duration
	Grants         []Grant
}

// News answers Heartbeat: partitions to stop reading (Revoke, at the epoch
// being revoked: finish, commit, release), new grants and renewals. The
// member applies revokes before grants. All lists may be empty.
type News struct {
	Ref      Ref
	Group    string
	MemberID string
	Revoke   []api.PartitionRef
	Grants   []Grant
	Renew    []Grant
	// Paid is how many of Grants and Renew the shell paid for already
	// (DeferNews: a token of the tenant's rate reserved while the
	// heartbeat was held); the machine only hands the number back.
	Paid int
}

// CommitReply answers Commit with the offsets now committed.
type CommitReply struct {
	Ref       Ref
	Committed []api.CommittedOffset
}

// LeaveReply answers Leave.
type LeaveReply struct {
	Ref Ref
}

// SyncReply answers SyncPoll. The shell renders it as api.SyncResponse and
// attaches the key set when KeysChanged (always set with Reset).
type SyncReply struct {
	Ref            Ref
	Gateway        string
	Seq            uint64
	Reset          bool
	KeysChanged    bool
	Fences         []api.Fence
	Denied         []api.Denied
	RevokedMembers []api.RevokedMember
	QoS            []api.QoSOverride
}

// RevokeReply answers RevokePartition once every gateway is safe for the
// fence at Epoch.
type RevokeReply struct {
	Ref       Ref
	Group     string
	Topic     string
	Partition int32
	Epoch     uint64
}

// LeaseReply answers Lease with the holder's grant. For an outside holder
// the shell mints it into the response; for a member it may too (the
// machine counts the grant as delivered either way), and the member also
// gets it in its news.
type LeaseReply struct {
	Ref   Ref
	Grant Grant
	Until time.Time
}

// RevokeMemberReply answers RevokeMember: the member's capabilities are
// denied on the gateways until Until; Fenced partitions were fenced.
// AlreadyRevoked: the member was revoked before this request (its
// revocation still runs, until Until); nothing was done, Fenced is 0.
type RevokeMemberReply struct {
	Ref            Ref
	Until          time.Time
	Fenced         int
	AlreadyRevoked bool
}

// GroupConfigReply answers SetGroupConfig with the resulting configuration.
type GroupConfigReply struct {
	Ref    Ref
	Config GroupConfig
}

// DeleteGroupReply answers DeleteGroup: how many members were revoked,
// leases ended and committed offsets dropped.
type DeleteGroupReply struct {
	Ref     Ref
	Members int
	Leases  int
	Offsets int
}

// QoSReply answers PutQoS with the override now in force (merged with the
// earlier one of its id).
type QoSReply struct {
	Ref      Ref
	Override api.QoSOverride
}

// ResetOffsetReply answers ResetOffset. LeaseEnded is the outside lease
// a forced reset ended, nil when there was none.
type ResetOffsetReply struct {
	Ref        Ref
	LeaseEnded *EndedLease
}

// EndedLease is an outside lease an admin action ended: its holder and
// until when it would have held.
type EndedLease struct {
	Holder string
	Until  time.Time
}

// Done answers requests with nothing to report (DenyJTI, UndoJoin,
// RedeliverNews).
type Done struct {
	Ref Ref
}

// Rejected refuses a request; Code comes from api's reject table.
type Rejected struct {
	Ref     Ref
	Code    api.Code
	Message string
	// Details go into the error body beside code and message (a limit's
	// name and value).
	Details map[string]any
}

func (r JoinReply) Request() Ref         { return r.Ref }
func (r News) Request() Ref              { return r.Ref }
func (r CommitReply) Request() Ref       { return r.Ref }
func (r LeaveReply) Request() Ref        { return r.Ref }
func (r SyncReply) Request() Ref         { return r.Ref }
func (r RevokeReply) Request() Ref       { return r.Ref }
func (r LeaseReply) Request() Ref        { return r.Ref }
func (r RevokeMemberReply) Request() Ref { return r.Ref }
func (r GroupConfigReply) Request() Ref  { return r.Ref }
func (r QoSReply) Request() Ref          { return r.Ref }
func (r DeleteGroupReply) Request() Ref  { return r.Ref }
func (r ResetOffsetReply) Request() Ref  { return r.Ref }
func (r Done) Request() Ref              { return r.Ref }
func (r Rejected) Request() Ref          { return r.Ref }
