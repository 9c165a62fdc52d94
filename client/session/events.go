package session

import (
	"time"

	"github.com/capgate/capgate/api"
)

// Event is one input to Step. Every event carries the time it happened;
// the session never reads a clock.
type Event interface {
	now() time.Time
}

// Joined: a join answered. The session adopts the member identity and the
// grants; it moves from Idle or Rejoining to Active.
type Joined struct {
	Now      time.Time
	Response api.JoinResponse
}

// NewsArrived: a heartbeat answered. Incarnation is Member().Incarnation
// read when the heartbeat was sent; news of an older incarnation is
// dropped. Revokes are applied before grants and renewals.
type NewsArrived struct {
	Now         time.Time
	Incarnation uint64
	News        api.HeartbeatResponse
}

// HeartbeatFailed: a heartbeat was rejected with Code. A rejoin code
// (unknown_member), or token_expired (the member token — never valid
// beyond the credential — ran out), of the current incarnation loses
// every partition and asks for a rejoin; other codes change nothing (the
// shell retries).
type HeartbeatFailed struct {
	Now         time.Time
	Incarnation uint64
	Code        api.Code
}

// FetchDone: the fetch with ID ended. On success Code is empty, Records
// and Bytes describe the batch (Records may be 0), Next is the offset to
// fetch next and Payload is the decoded records, opaque to the session.
// Canceled reports a fetch the shell cancelled (after CancelFetch or on
// shutdown). On offset_out_of_range, Earliest and Latest are the
// partition's bounds, -1 when unknown.
type FetchDone struct {
	Now       time.Time
	ID        uint64
	Partition Partition
	Records   int
	Bytes     int64
	Next      int64
	Payload   any
	Code      api.Code
	Canceled  bool
	Earliest  int64
	Latest    int64
}

// Polled: the user asked for records. Everything delivered by earlier
// Polls counts as processed from now on; then up to MaxRecords records
// (0: Config.PollMaxRecords; whole batches, at least one) are delivered.
type Polled struct {
	Now        time.Time
	MaxRecords int
}

// Marked: the user processed the records before each mark's offset (a
// record at offset o marks o+1). A mark of a partition not held at that
// epoch, not yet delivered, or behind the processed offset changes
// nothing.
type Marked struct {
	Now   time.Time
	Marks []Mark
}

// Mark names an offset of one partition at one epoch: the offset after
// the last record processed.
type Mark struct {
	Partition Partition
	Epoch     uint64
	Offset    int64
}

// CommitRequested: the user asked to commit, and CommitResult{Ticket}
// reports the outcome. Without Offsets, everything delivered so far
// counts as processed (unless Config.ManualMarks) and the processed
// offsets of every held partition that moved are committed. With
// Offsets, exactly those are committed (and become the processed
// offsets): each must name a partition held at its epoch and an offset
// between the committed and the delivered one, or nothing is sent and
// the result carries stale_epoch, offset_regression or bad_request.
//
// Commits that are not releases go one at a time (the lane, lane.go); a
// request is sent as soon as the commit in flight ended. Async asks for a
// background commit: named offsets only move processed offsets forward
// (as Marked does), and while a commit is in flight every Async request
// is merged into the next one (CommitMerged: one waiting request at
// most), which commits the processed offset of every partition they
// named (all that moved, for a request naming none). Its CommitResult
// answers them all: success means the coordinator accepted offsets at or
// beyond those asked for. A request the session could not send (it
// closed or lost its partitions while the request waited) is answered
// with an error, never dropped.
type CommitRequested struct {
	Now     time.Time
	Ticket  uint64
	Offsets []Mark
	Async   bool
}

// CommitDone: the commit with ID ended; Code is empty on success. Err is
// the shell's error, passed back untouched in CommitResult.
type CommitDone struct {
	Now  time.Time
	ID   uint64
	Code api.Code
	Err  error
}

// HookDone: the revoke hook of CallRevoke{ID} returned.
type HookDone struct {
	Now time.Time
	ID  uint64
}

// Tick: time passed; the shell steps one at NextDeadline.
type Tick struct {
	Now time.Time
}

// CloseRequested: the user is closing the consumer. Every held partition
// is revoked (hook, commit, release); then the member leaves.
type CloseRequested struct {
	Now time.Time
}

// RenewRequested: the member token nears its expiry (which is never
// later than the credential's the member joined with): the member is
// renewed by a fresh join with the shell's current credential. First
// every held partition is revoked as by the coordinator (hook, the
// user's acknowledgement or RevokeTimeout, commit of the processed
// offset, release), so nothing is lost and nothing read twice; then the
// member leaves and the session rejoins (Rejoin, as a new member) instead
// of stopping. Grants arriving meanwhile are not taken (as while
// closing). A CloseRequested during the renewal makes it a close.
// Ignored unless Active.
type RenewRequested struct {
	Now time.Time
}

// MemberRenewed: a rejoin of this very member by its member id answered
// (a renewed credential of the same identity carried the member over, or
// a subscription change): the member token is replaced — a rejoin with a
// credential answers one expiring no later than that credential — while
// the incarnation, partitions and offsets stay; the answer's grants are
// applied as heartbeat news. Ignored unless Active and Response names
// this member.
type MemberRenewed struct {
	Now      time.Time
	Response api.JoinResponse
}

// LeaveDone: the leave ended (Code empty on success). The session stops,
// or after a RenewRequested rejoins.
type LeaveDone struct {
	Now  time.Time
	Code api.Code
}

func (e Joined) now() time.Time          { return e.Now }
func (e NewsArrived) now() time.Time     { return e.Now }
func (e HeartbeatFailed) now() time.Time { return e.Now }
func (e FetchDone) now() time.Time       { return e.Now }
func (e Polled) now() time.Time          { return e.Now }
func (e Marked) now() time.Time          { return e.Now }
func (e CommitRequested) now() time.Time { return e.Now }
func (e CommitDone) now() time.Time      { return e.Now }
func (e HookDone) now() time.Time        { return e.Now }
func (e Tick) now() time.Time            { return e.Now }
func (e CloseRequested) now() time.Time  { return e.Now }
func (e RenewRequested) now() time.Time  { return e.Now }
func (e MemberRenewed) now() time.Time   { return e.Now }
func (e LeaveDone) now() time.Time       { return e.Now }
