// Package group is capgate's coordinator state machine: consumer groups,
// members, per-partition epochs and handoffs, admin leases, the sync log
// the gateways follow, and every timer of DESIGN §4. It is pure: no IO, no
// clock, no goroutines; time is an argument and member ids come from the
// seeded *rand.Rand given to New.
//
// # Using it
//
// The coordinator shell owns one *Machine in one goroutine, in the style of
// etcd-io/raft:
//
//  1. Start with New(cfg, rng), or after a restart with
//     Restore(cfg, rng, snapshot, now) where snapshot holds the latest
//     record of every key the shell persisted (deleted keys left out).
//  2. For each request, call Step(now, event) with a Ref unique among the
//     requests in flight; for timers, call Tick(now) when the deadline of
//     NextDeadline() arrives (one timer suffices; re-arm it after every
//     Step or Tick). Step fires due timers itself first.
//  3. If HasReady(), take rd := Ready().
//  4. Persist rd.Persist durably, in one synchronous transaction, BEFORE
//     anything else. The records carry every epoch and sync seq the
//     messages mention; sending first could let a restart reissue an
//     epoch or a seq.
//  5. Only then send rd.Messages: each answers the request with the same
//     Ref (exactly one reply per request, possibly in a later Ready).
//     Grants are minted as described on Grant, sync replies are rendered
//     as api.SyncResponse with the key set attached when KeysChanged.
//  6. Call Advance(), then go back to 2.
//
// Heartbeats and sync polls are long polls: with nothing to say the
// machine holds them and answers in a later Ready (when news arrives or
// the wait ends), so the shell parks the HTTP request under its Ref. A
// reply whose connection is gone may be dropped: the member's next
// heartbeat says Resync and gets, at once, everything it owns (renewals)
// and every revoke it has not released; without it lost grants come back
// as renewals before half the lease is left, and a rejoin with the member
// id re-sends every grant; a lost sync reply is re-sent on the next poll. A
// News the shell knows it did not deliver (minting its capabilities
// failed) goes back with RedeliverNews: the member's next heartbeat
// carries it again at once (redeliver.go says why not an undo).
//
// # What Persist holds
//
// One record per changed key, latest state only; a record with Deleted
// removes its key. The shell maps each kind to its store keys:
//
//	PartitionRecord      group/topic/partition: epoch and ownership (never deleted)
//	OffsetRecord         group/topic/partition: committed offset and metadata
//	MemberRecord         group/member id: subscription, session timeout
//	GroupRecord          group: GroupConfig
//	LeaseRecord          group/topic/partition: admin lease (pin)
//	DeniedRecord         jti: denied capability id
//	RevokedMemberRecord  group/member id: revoked member
//	QoSRecord            override id: QoS override
//	GatewayRecord        gateway id: known gateway
//	SyncSeqRecord        the highest sync seq handed out
//	TopicRecord          topic: partition count
//
// After a restart the shell reads them all back into a Snapshot. Renewed
// capability expiries are deliberately not persisted: Restore assumes
// every capability issued before the restart lives until now+max_lease.
//
// Offsets: a Grant's Offset is the committed offset, or OffsetEarliest
// (-2) / OffsetLatest (-1) per the group's offset_reset when nothing was
// committed; the shell resolves the sentinel against Kafka.
//
// DescribeGroup, Groups, Gateways, Offsets and CheckInvariants only read.
//
// # Concurrency
//
// A Machine is not safe for concurrent use; every method, readers
// included, must be called from the goroutine that owns it.
package group
