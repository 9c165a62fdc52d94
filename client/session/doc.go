// Package session is the consumer's per-partition logic with no IO: which
// partitions to fetch, from which offset, with which capability; what to
// deliver to the user; what to commit, when to release a revoked
// partition, and when to rejoin (DESIGN §4). It imports no net, os or
// clock and starts no goroutine: time comes in with every event, so a
// deterministic simulation can drive it.
//
// # Contract
//
// The shell (package client) owns one *Session and feeds it events:
//
//  1. Build it with New(Config) and step Joined with the join response.
//  2. Step every event that happens — NewsArrived, HeartbeatFailed,
//     FetchDone, Polled, CommitRequested, CommitDone, HookDone, Tick,
//     CloseRequested, LeaveDone — one at a time, never concurrently.
//  3. Carry out the returned actions in order: Fetch (then step FetchDone
//     with its ID), CancelFetch, Deliver (the answer to Polled), Commit
//     (then CommitDone), CommitResult (answer the user's commit),
//     CallRevoke (then HookDone unless Lost), CallGrant, RevokeTimedOut
//     (log it), Rejoin (then Joined), Leave (then LeaveDone), Stop.
//  4. Step Tick at NextDeadline, and send heartbeats with
//     wait_ms = HeartbeatWait(now, limit) under Member().
//
// Every request made for an action must report back, even when it fails
// or is cancelled: a transport error is reported with a retriable code
// (unavailable), never with an empty one.
//
// # Per-partition states
//
//	granted ──► Fetching ──revoke / 409 / close──► Revoking ──commit(release)──► released
//	               │  ▲                                                     (epoch kept in seen)
//	               └──┘ renew: same epoch, new capability, offsets kept
//
// In detail:
//
//   - Fetching: one fetch at a time with capability+epoch from next.
//     No fetch starts when the buffer holds BufferMaxBytes, after the
//     gateway refused the capability (until a new one arrives), or when
//     the capability expires within ExpiryMargin (until renewed).
//   - Revoking: entered on a heartbeat revoke naming the held epoch (or a
//     later one), on a gateway 409 capability_revoked, or on close. The
//     in-flight fetch is cancelled and its result dropped, undelivered
//     batches are dropped, the user's revoke hook is called. When the
//     fetch ended, the hook returned, no commit of the partition is in
//     flight and the user is done with the records already delivered
//     (below), the processed offset is committed with the OLD capability
//     and release:true; the partition is then gone.
//
// The user is done with a revoked partition's records when everything
// delivered is processed, or it came back after they were handed out:
// the next Polled, a CommitRequested of everything, CloseRequested (with
// ManualMarks these mark nothing, so the release is at the marked
// offset). Until then the next holder must not start: it would read the
// records this user is still processing, at the same time. After
// RevokeTimeout the partition is released anyway, at its processed
// offset, and RevokeTimedOut tells the shell: the next holder reads the
// records from there again, perhaps while this user still processes them.
//   - Grants and renewals are one rule: the held epoch replaces the
//     capability only (offsets untouched); a higher epoch replaces
//     everything (a fresh partition object starting at the grant's
//     offset; results addressed to the old one are dropped); a lower
//     epoch, or an epoch not above one already released, is ignored.
//
// # Offsets
//
// next is where the next fetch reads; delivered is the offset after the
// last record handed to the user; processed is the offset after the last
// record the user finished. Records handed out by a Polled count as
// processed at the next Polled, CommitRequested or CloseRequested —
// with Config.ManualMarks only once marked (Marked, or a commit naming
// offsets). The
// offset committed, on request or on release, is processed: the next
// holder starts right after the last record this one processed, so a
// clean handoff loses and repeats nothing.
//
// A grant starts at its offset, or — when it says nothing was committed
// (api.Grant.OffsetReset) and Config.OffsetReset names another policy —
// at that policy's sentinel (-2, -1), which the gateway resolves; the
// first answer without records places next, delivered and processed at
// its next offset, so the reset position is committed.
//
// # Membership
//
// unknown_member (from a heartbeat or a commit of the current
// incarnation) loses every partition at once — CallRevoke{Lost:true}, no
// commit — and asks for a Rejoin; a new incarnation begins at Joined, and
// results of older incarnations are ignored. CloseRequested revokes and
// releases everything, then Leave, then Stop.
//
// Concurrency: a Session is not safe for concurrent use. Actions and the
// slices in them belong to the caller.
package session
