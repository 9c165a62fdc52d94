package group

import (
	"time"

	"github.com/capgate/capgate/api"
)

// Ref identifies one request of the shell. Every event carrying a Ref gets
// exactly one reply Message with the same Ref: at once, or in a later
// Ready (parked heartbeats and sync polls, admin revokes and leases).
// The shell picks Refs: non-zero and unique among requests in flight.
type Ref uint64

// Event is an input to Step. The concrete types are listed below.
type Event interface{ isEvent() }

// Join adds a member to Group, bound to Credential, or rejoins a known
// MemberID. A rejoin is accepted only from the credential the member is
// bound to, or with the member's own token (ByMemberToken, which may not
// change the subscription); from anyone else it is refused as an unknown
// member. A rejoin always fences: every partition the member owns is
// revoked from it and granted to it again under a fresh epoch, so the
// reply never re-sends a capability, and a capability handed out under
// the old epoch dies at the gateways before the new one exists. With
// InstanceID naming a live member, the new member replaces it (static
// membership, same credential only, else 409 conflict) and takes its
// partitions back under fresh epochs. A join whose credential is denied
// is refused (capability_revoked). Exactly one of Topics and TopicPattern
// must be set; the pattern must match a whole topic name. Zero
// SessionTimeout means the group's default; empty Assignor means the
// group's. Reply: JoinReply or Rejected.
type Join struct {
	Ref            Ref
	Group          string
	MemberID       string
	InstanceID     string
	ClientID       string
	Topics         []string
	TopicPattern   string
	SessionTimeout time.Duration
	Assignor       string
	// Credential is what authenticated the join (the shell always sets
	// its ID); ignored with ByMemberToken.
	Credential    Credential
	ByMemberToken bool
	// Renew renews member MemberID in place (the shell verified the
	// member's current member token, api.JoinRequest.RenewToken): the
	// rejoin's checks, and the subscription unchanged, but no fence —
	// the member goes on holding what it holds under the same epochs, as
	// its own process: whoever holds its member token is the member, and
	// the fence of a rejoin is for an incarnation that lost its state.
	// Not with ByMemberToken.
	Renew bool
	// RenewFrom is, with Renew, the id of a credential the shell verified
	// the renewal also presented (api.JoinRequest.RenewCredential), of
	// the same issuer and name as Credential: when the member is bound to
	// it, the renewal rebinds the member to Credential — the bearer holds
	// both, so it is the member's holder renewing its own credential (an
	// admin-minted credential renewed by a new one of the same name).
	RenewFrom string
	// JoinKey is the client's key for this join across its attempts
	// (the Idempotency-Key header; the shell checked its syntax), ""
	// for none. It names the member the join makes: the member id's 16
	// hex digits are drawn from Group, the tenant (Tenant, else
	// Credential.ID) and JoinKey (keyedMemberID) instead of the
	// machine's rng, so a repeat of the join — an attempt given up on a
	// leader that was only slow, which made the member anyway — finds
	// that member (still live, bound to the same credential or to
	// another token of the same OAuth client, which the repeat rebinds
	// it to) and is stepped as its rejoin (fenced) instead
	// of making a second member nobody heartbeats. The mapping is the
	// member id itself: nothing more is kept, and a standby that read the
	// member from the log maps the repeat alike. Ignored with MemberID
	// (the member is named already).
	JoinKey string
	// Tenant is who a group this join creates counts for
	// (limits.groups_per_credential bounds the groups a tenant created
	// that still exist): the stable identity behind the credential, which
	// the holder cannot multiply by obtaining more credentials — an OAuth
	// client for each credential it obtained, rather than each of them.
	// Empty means Credential.ID.
	Tenant string
	// Arrived is when the shell received the join (less any time it
	// waited on purpose: its tenant's debt); zero for unknown. How long
	// it took to be stepped is how slow the shell is now, which an empty
	// group's join window waits for (window.go windowQuiet).
	Arrived time.Time
	// Concurrent is how many other joins of the group the shell was
	// working on (past their bearer's and scope's checks) when it built this one: an
	// empty group's join window waits for them, up to
	// initial_assign_delay_max (window.go).
	Concurrent int
	// Matched is TopicPattern matched outside the loop against the
	// machine's TopicNames (MatchTopics), nil for none: the machine then
	// matches only the topics changed since (topicnames.go), else every
	// topic it knows.
	Matched *PatternMatch
}

// Credential identifies what opened a member: a capgate client credential
// or an identity from an IdP. ID is the stable identity: what a rejoin by
// member id must present again, and the id an admin denies (POST
// /v1/admin/capabilities/{id}/revoke) to end every member it opened. For
// a client credential it is the credential's jti; an IdP identity uses an
// id derived from its issuer and subject, so a refreshed token is the same
// identity. Issuer and Subject are shown in admin views.
type Credential struct {
	ID      string
	Issuer  string
	Subject string
	// Tenant is who the member's places of limits.groups_per_credential
	// count for, when not ID: the machine sets it from Join.Tenant (an
	// OAuth client's "oauth:<client_id>") and persists it with the
	// member.
	Tenant string
}

// tenant is who a member bound to c counts for: Tenant, else ID.
func (c Credential) tenant() string {
	if c.Tenant != "" {
		return c.Tenant
	}
	return c.ID
}

// RedeliverNews puts back a heartbeat answer the shell could not deliver
// (minting its capabilities failed after the Ready carrying it was
// persisted; the member got a 500), so the member's next heartbeat
// carries it again — at once, not after a wait. News is the message the
// machine sent. What still holds goes back into the member's news: a
// grant or renewal of a partition the member still owns at that epoch
// (rendered afresh: same epoch, current expiry), a revoke of a partition
// still being revoked from it at that epoch and not released. Anything
// that moved on meanwhile is left out. Nothing is persisted and no epoch
// changes: the epoch was the member's before, and stays its alone.
// Reply: Done, or Rejected (unknown_member) when the member is gone.
type RedeliverNews struct {
	Ref  Ref
	News News
}

// DeferNews holds a heartbeat again whose answer the tenant's rate pays
// for not all of yet (the shell's paceMints): News — the machine's
// answer, nothing of it minted, no revokes in it — goes back into the
// member's news (as RedeliverNews) and Ref, the same heartbeat, is held
// until NotBefore, when the last of the tokens the shell paid or
// reserved for its capabilities (Paid of them: those that come within
// the hold) is the tenant's; then it is answered with the member's news
// and Paid. Paid counts every token paid for News, News.Paid (what an
// earlier hold handed) among them. When the heartbeat's wait ends first (Until,
// at most heartbeat_wait from now) it is answered empty, and the
// member's next heartbeat is held until NotBefore in turn. Answered without an empty reply and its
// member straight back with another heartbeat, a token of the same rate
// each, a member in a deficit spent most of its tenant's rate on
// heartbeats that carried nothing (3 of 4 after a takeover at 2 tokens/s).
// A revoke for the member meanwhile answers it at once (revokes never
// wait for tokens), as does another heartbeat of the member (this one
// empty) or the end of its session. NotBefore is cut to the member's
// session_timeout from now; nothing is persisted and no epoch changes. With
// limits.held_heartbeats_per_tenant held already it is answered empty at
// once, the news kept for the next heartbeat. Reply: News, or Rejected
// (unknown_member) when the member is gone.
type DeferNews struct {
	Ref       Ref
	News      News
	NotBefore time.Time
	Until     time.Time
	Paid      int
}

// Heartbeat asks for the member's news. With news pending the reply comes
// at once; otherwise it is held up to Wait (0 or above heartbeat_wait means
// heartbeat_wait) and answered in the Ready that first has news for the
// member, or empty when the wait ends. A second heartbeat of the same
// member answers the held one empty. Reply: News or Rejected.
//
// Resync: the member did not get the answer to an earlier heartbeat (no
// answer, a timeout, a 5xx), which the machine may have counted as
// delivered. The news then carries, at once, every partition the member
// owns as a renewal (same epoch; the shell mints a fresh capability) and
// every revoke it has not released (resync, redeliver.go) — the grants
// and renewals when the token they wait for comes, if the member's news
// waits for one (DeferNews). Nothing is persisted and no epoch moves.
type Heartbeat struct {
	Ref      Ref
	Group    string
	MemberID string
	Wait     time.Duration
	Resync   bool
}

// CommitOffset is one partition's offset in a commit. Epoch is the ep claim
// of the verified capability that came with it. With Release set on the
// commit, Offset < 0 releases without committing.
type CommitOffset struct {
	Topic     string
	Partition int32
	Epoch     uint64
	Offset    int64
	Metadata  string
}

// Commit stores offsets; all or nothing. Release marks the listed
// partitions that are being revoked from the member as released
// (PartitionCommitted). With Outside, MemberID names an outside lease
// holder committing with its lease capability (no release). Reply:
// CommitReply or Rejected.
type Commit struct {
	Ref      Ref
	Group    string
	MemberID string
	Offsets  []CommitOffset
	Release  bool
	Outside  bool
}

// Leave commits Offsets (all or nothing, as a releasing commit) and removes
// the member; its partitions move without waiting for more commits.
// Reply: LeaveReply or Rejected.
type Leave struct {
	Ref      Ref
	Group    string
	MemberID string
	Offsets  []CommitOffset
}

// UndoJoin removes a member whose join the shell could not answer (a
// mint failed after the Ready that made the member was persisted):
// nobody holds a token of it, so it goes as a Leave without offsets
// does, and its partitions move at once. A join answered 500 thus
// leaves no member behind. Reply: Done, or Rejected (unknown_member)
// when the member is gone already.
type UndoJoin struct {
	Ref      Ref
	Group    string
	MemberID string
}

// Topics updates topic metadata: Partitions maps topic to partition count
// (upserts; a count never shrinks), Deleted lists topics that are gone.
// Topics not mentioned are unchanged. No reply.
type Topics struct {
	Partitions map[string]int32
	Deleted    []string
	// Hits: the live patterns' matches among the new topics, made
	// outside the loop (LivePatterns.MatchAdded); nil, or made at another
	// version, the loop matches them itself.
	Hits *TopicHits
}

// DeferredHits carries a deferred tenant's matches of a change's new
// topics (TopicHits.MatchDeferred), made outside the loop once the
// Topics event they were deferred from went in (deferredHits). No reply.
type DeferredHits struct {
	Hits *TopicHits
}

// SyncPoll is a gateway's GET /v1/sync. After acknowledges every update up
// to After; the reply carries the updates after it, or a full snapshot
// (Reset) when After is 0 or outside the retained log. With nothing newer
// the poll is held up to Wait (0 or above sync_wait_max means
// sync_wait_max). Instance is the polling process's nonce ("" from a
// gateway that sends none): a poll from another live instance than the
// one holding the id is refused (gateways.go, claimGateway). Reply:
// SyncReply, or Rejected without a gateway id or on such a conflict.
type SyncPoll struct {
	Ref      Ref
	Gateway  string
	Instance string
	After    uint64
	Wait     time.Duration
}

// GatewayLeave is a gateway's POST /v1/sync/leave: it stopped serving
// (every fetch it admitted has finished) and polls no more, so no
// revocation waits for it: it is forgotten at once, its record deleted,
// and the handoffs only it held back complete. A poll it still had held
// is answered. Unknown gateways are fine (a repeated leave). A later poll
// with the same id registers it again as a new gateway. A leave naming
// an Instance other than the one holding the id is refused and changes
// nothing; "" leaves whichever holds it. Reply: Done, or Rejected
// without a gateway id or on such a conflict.
type GatewayLeave struct {
	Ref      Ref
	Gateway  string
	Instance string
}

// KeysChanged tells the machine the signing key set changed; it appends a
// sync entry so every gateway's next reply has KeysChanged set and the
// shell attaches the keys. No reply.
type KeysChanged struct{}

// RevokePartition fences a partition and reassigns it (possibly to the same
// member under a new epoch). An outside lease on it ends. The reply,
// RevokeReply, comes once every gateway is safe for the fence.
type RevokePartition struct {
	Ref       Ref
	Group     string
	Topic     string
	Partition int32
	Reason    string
}

// Lease pins a partition to Holder until now+TTL, moving it through the
// normal handoff. A Holder that is not a member of the group is an outside
// holder: the partition leaves the assignment and its grant comes in the
// reply. The reply, LeaseReply, comes with the grant. Leasing again to the
// current holder extends the pin and re-sends its grant.
type Lease struct {
	Ref       Ref
	Group     string
	Topic     string
	Partition int32
	Holder    string
	TTL       time.Duration
	// Force moves a lease in force to another holder (its capability is
	// fenced); without it that is 409 conflict naming the holder.
	Force bool
}

// DenyJTI denies one capability id (and its chained children) until
// Expires. When JTI is the Credential.ID of live members, each of them is
// revoked as by RevokeMember (partitions fenced and reassigned, its
// capabilities refused by the gateways), and joins with it are refused.
// Reply: Done.
type DenyJTI struct {
	Ref     Ref
	JTI     string
	Expires time.Time
}

// DenyJTIs denies several ids at once, all or none: when the new ones do
// not all fit under limits.denied the reply is Rejected (limit_exceeded)
// and nothing changes — no id denied, no member revoked. The records go
// out in one Ready, which the shell persists as one write. An OAuth
// client's revoke denies every credential it obtained with it. Reply:
// Done or Rejected.
type DenyJTIs struct {
	Ref     Ref
	Denials []Denial
}

// Denial is one id of a DenyJTIs, denied until Expires.
type Denial struct {
	JTI     string
	Expires time.Time
}

// RevokeMember fences every partition of the member, denies its
// capabilities on the gateways until they expire, and removes it.
// Reply: RevokeMemberReply or Rejected.
type RevokeMember struct {
	Ref      Ref
	Group    string
	MemberID string
}

// PutQoS adds a QoS override until Override.Until, or updates the one of
// the same ID: the fields Keep names are taken from the earlier override
// (the request did not set them), the others replace it. Reply: Done or
// Rejected.
type PutQoS struct {
	Ref      Ref
	Override api.QoSOverride
	Keep     QoSKeep
}

// QoSKeep names the fields of an override a PutQoS leaves as they were.
type QoSKeep struct {
	LogLevel       bool
	Monitor        bool
	MaxBytesPerSec bool
}

// merge is next with the kept fields of old.
func (k QoSKeep) merge(old, next api.QoSOverride) api.QoSOverride {
	if k.LogLevel {
		next.LogLevel = old.LogLevel
	}
	if k.Monitor {
		next.Monitor = old.Monitor
	}
	if k.MaxBytesPerSec {
		next.MaxBytesPerSec = old.MaxBytesPerSec
	}
	return next
}

// SetGroupConfig changes the listed settings of a group (nil = unchanged),
// creating the group if needed. Reply: GroupConfigReply or Rejected.
type SetGroupConfig struct {
	Ref               Ref
	Group             string
	Assignor          *string
	SessionTimeout    *time.Duration
	HandoffTimeout    *time.Duration
	MaxMovesPerSecond *int
	OffsetReset       *string
}

// ResetOffset sets a partition's committed offset, possibly backwards (the
// only way an offset moves back). A held partition is fenced and
// reassigned at once: its holder's later commits are refused and the next
// grant starts at Offset. A partition leased to an outside holder is
// refused (409 conflict, details lease) unless Force: the fence would end
// what another admin pinned for a holder the machine cannot regrant (it
// has no heartbeat), so the reset ends the lease only when asked to.
// Reply: ResetOffsetReply or Rejected.
type ResetOffset struct {
	Ref       Ref
	Group     string
	Topic     string
	Partition int32
	Offset    int64
	Metadata  string
	Force     bool
}

// DeleteGroup deletes a group: its committed offsets, settings and leases
// go, and it no longer lists or describes (delete.go). Refused with 409
// while it has live members or outside lease holders, unless Force: then
// each member is revoked as by RevokeMember and each lease ends first.
// Reply: DeleteGroupReply, or Rejected (404 for an unknown group).
type DeleteGroup struct {
	Ref   Ref
	Group string
	Force bool
}

func (DeleteGroup) isEvent()     {}
func (Join) isEvent()            {}
func (Heartbeat) isEvent()       {}
func (Commit) isEvent()          {}
func (Leave) isEvent()           {}
func (UndoJoin) isEvent()        {}
func (RedeliverNews) isEvent()   {}
func (DeferNews) isEvent()       {}
func (Topics) isEvent()          {}
func (DeferredHits) isEvent()    {}
func (SyncPoll) isEvent()        {}
func (GatewayLeave) isEvent()    {}
func (KeysChanged) isEvent()     {}
func (RevokePartition) isEvent() {}
func (Lease) isEvent()           {}
func (DenyJTI) isEvent()         {}
func (DenyJTIs) isEvent()        {}
func (RevokeMember) isEvent()    {}
func (PutQoS) isEvent()          {}
func (SetGroupConfig) isEvent()  {}
func (ResetOffset) isEvent()     {}
