package session

import (
	"time"

	"github.com/capgate/capgate/api"
)

// Action is one output of Step, for the shell to carry out in order.
type Action interface {
	isAction()
}

// Fetch: read Partition from Offset with Capability, then step
// FetchDone{ID}. At most one fetch per partition is outstanding, except
// for a moment after CancelFetch or a re-grant.
type Fetch struct {
	ID         uint64
	Partition  Partition
	Epoch      uint64
	Offset     int64
	Capability string
	// MaxBytes is the most record bytes to ask for (Config.FetchMaxBytes
	// and fetchBytes); 0 when the config sets no size.
	MaxBytes int32
	// ExpiresAt is when Capability expires (zero: unknown). The shell
	// retries a fetch that failed retriably no later than ExpiresAt less
	// Config.ExpiryMargin; past it, it ends the fetch with that failure
	// (FetchDone) and the partition waits for its renewal, as a new
	// fetch would.
	ExpiresAt time.Time
}

// CancelFetch: abort fetch ID if it is still running; its FetchDone is
// still expected (Canceled or not) and its records will be dropped.
type CancelFetch struct {
	ID        uint64
	Partition Partition
}

// Deliver: the answer to Polled; hand the non-empty batches to the user
// in order. It is emitted for every Polled, possibly with no batches.
type Deliver struct {
	Batches []Batch
}

// Commit: send POST commit with Token and Offsets (each carrying the
// capability of the epoch it is committed under), then step
// CommitDone{ID}. Release:true is the PartitionCommitted notice. Ticket
// is the user's request it serves, 0 for the session's own commits.
// Until is the earliest expiry of the capabilities it carries (zero:
// unknown), for the shell's logs and decisions; client/driver retries
// within request_timeout.
type Commit struct {
	ID      uint64
	Ticket  uint64
	Token   string
	Offsets []api.CommitOffset
	Release bool
	Until   time.Time
}

// CommitResult answers CommitRequested{Ticket} once every commit made
// for it ended. Code and Err are those of the first failure, empty on
// success.
type CommitResult struct {
	Ticket uint64
	Code   api.Code
	Err    error
}

// CommitMerged: the background request Ticket was merged into the
// waiting request Into (CommitRequested{Async}); CommitResult{Into}
// answers both, and none comes for Ticket.
type CommitMerged struct {
	Ticket uint64
	Into   uint64
}

// CallRevoke: run the user's revoke hook for Partitions, then step
// HookDone{ID}. Lost:true means the partitions are already gone (the
// member expired): nothing will be committed and HookDone is not needed.
type CallRevoke struct {
	ID         uint64
	Partitions []Partition
	Lost       bool
}

// CallGrant: run the user's grant hook for Partitions. Fetching has
// already started; the session does not wait for the hook.
type CallGrant struct {
	Partitions []Partition
}

// RevokeTimedOut: revoked partitions waited RevokeTimeout for the user to
// be done with records Poll handed it (no Polled, commit of everything,
// Close, or marks up to Delivered came) and are released all the same,
// at their processed offset, in the Commit that follows. The next holder
// starts there: it reads the records from Processed to Delivered again,
// perhaps while this user still processes them. For the shell to log;
// nothing to step.
type RevokeTimedOut struct {
	Partitions []Overdue
	Timeout    time.Duration
}

// Overdue is one partition of RevokeTimedOut: Processed is the offset it
// is released at, Delivered the offset after the last record handed to
// the user.
type Overdue struct {
	Partition Partition
	Processed int64
	Delivered int64
}

// Rejoin: the member is gone; join again without a member id and step
// Joined.
type Rejoin struct{}

// Leave: send POST leave with Token, then step LeaveDone. Renew: the
// leave ends a renewal (RenewRequested), not the consumer: a Rejoin
// follows it.
type Leave struct {
	Token string
	Renew bool
}

// Stop: the session is over; stop the heartbeat loop and every fetch.
type Stop struct{}

func (Fetch) isAction()          {}
func (CancelFetch) isAction()    {}
func (Deliver) isAction()        {}
func (Commit) isAction()         {}
func (CommitResult) isAction()   {}
func (CommitMerged) isAction()   {}
func (CallRevoke) isAction()     {}
func (CallGrant) isAction()      {}
func (RevokeTimedOut) isAction() {}
func (Rejoin) isAction()         {}
func (Leave) isAction()          {}
func (Stop) isAction()           {}
