package harness

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/capgate/capgate/api"
)

// PartitionKey names one partition of one group. Produced records have no
// group ("").
type PartitionKey struct {
	Group     string
	Topic     string
	Partition int32
}

func (k PartitionKey) String() string {
	if k.Group == "" {
		return fmt.Sprintf("%s/%d", k.Topic, k.Partition)
	}
	return fmt.Sprintf("%s:%s/%d", k.Group, k.Topic, k.Partition)
}

// Fetch is one fetch a gateway answered, from its trace line: the request
// was read at Start, the answer was ready at End (Start + elapsed).
// Outcome is "ok" (records served) or the api code of the refusal.
type Fetch struct {
	Gateway string // the gateway's id
	Key     PartitionKey
	Holder  string // the capability's sub: a member id
	Epoch   uint64
	JTI     string
	Outcome string
	Records int
	Offset  int64 // the offset asked for
	Next    int64 // next_offset answered (ok only)
	Start   Time
	End     Time
}

// OK reports whether the fetch was admitted and served.
func (f Fetch) OK() bool { return f.Outcome == "ok" }

// Grant is a capability a member received, in a join answer or in a
// heartbeat's grants or renewals.
type Grant struct {
	Consumer string // the harness's name for the consumer
	Member   string // the coordinator's member id
	Key      PartitionKey
	Epoch    uint64
	Offset   int64 // where the holder starts (new grants)
	Expires  Time  // the capability's expires_at
	Renewal  bool
	At       Time // when the answer was read
}

// Revoke is a revocation a member received in a heartbeat answer.
type Revoke struct {
	Consumer string
	Member   string
	Key      PartitionKey
	Epoch    uint64
	At       Time
}

// Call is one request a member sent to the coordinator (join, heartbeat,
// commit, leave): Sent is when it left, Done when the answer (or the
// failure) came back. Status is 0 on a transport failure or while it was
// cut off by a kill.
type Call struct {
	Consumer string
	Member   string // "" for a join until it is answered
	Op       string
	Status   int
	Code     string
	Sent     Time
	Done     Time
}

// Commit is one partition's offset in a commit request and its answer.
// Answered is false while the answer is unknown (the consumer died with
// the request in flight): the coordinator may have accepted it.
type Commit struct {
	Consumer string
	Member   string
	Key      PartitionKey
	Epoch    uint64 // the epoch of the capability it was committed with
	Offset   int64
	Release  bool
	Status   int // 200 when the coordinator accepted the whole request
	Code     string
	Answered bool
	Sent     Time
	Done     Time
}

// Accepted reports whether the coordinator accepted the commit.
func (c Commit) Accepted() bool { return c.Status == 200 }

// MayHaveLanded reports whether the coordinator may have accepted the
// commit: accepted, or its answer never came (unanswered, or the
// connection failed after it was sent).
func (c Commit) MayHaveLanded() bool { return c.Accepted() || !c.Answered || c.Status == 0 }

// ClientFetch is a fetch as the member saw it (status and code only).
type ClientFetch struct {
	Consumer string
	Member   string
	Gateway  string // base URL
	Key      PartitionKey
	Epoch    uint64
	Offset   int64
	Status   int
	Code     string
	Sent     Time
	Done     Time
}

// Delivery is one record Poll handed to the application.
type Delivery struct {
	Consumer string
	Member   string
	Key      PartitionKey
	Epoch    uint64
	Offset   int64
	Value    string
	At       Time
}

// Produced is one record Kafka acknowledged.
type Produced struct {
	Topic     string
	Partition int32
	Offset    int64
	Value     string
	At        Time
}

// SyncAnswer is a sync answer the coordinator sent to a gateway, as it
// passed the SyncTap on its way to the gateway.
type SyncAnswer struct {
	Gateway string
	Seq     uint64
	Reset   bool
	Fences  []api.Fence
	At      Time
}

// SyncPoll is a gateway's sync poll: polling with after=S acknowledges S.
// Arrived is when it reached the tap (the gateway had applied S by then);
// Forwarded is when the tap passed it on to the coordinator (0 if it
// never did).
type SyncPoll struct {
	Gateway   string
	After     uint64
	Arrived   Time
	Forwarded Time
	// NotLeader: the replica it was forwarded to answered 421
	// not_leader — it does not lead, so the coordinator did not hear the
	// gateway (a gateway cut off from the leader alone still reaches the
	// standbys).
	NotLeader bool
}

// GatewayLeave is a gateway's POST /v1/sync/leave as its SyncTap
// forwarded it: the gateway sends it after it stopped serving (a clean
// shutdown), so from Sent on it admits nothing; the coordinator then
// waits for it no more (DESIGN §4).
type GatewayLeave struct {
	Gateway string
	Sent    Time
}

// PartitionState is the coordinator's view of a partition at one moment
// (GET /v1/admin/groups/{g}). Committed is −1 when nothing is committed.
type PartitionState struct {
	Key        PartitionKey
	Epoch      uint64
	State      string
	Owner      string
	OwnerEpoch uint64
	Committed  int64
	At         Time
}

// GatewayState is the coordinator's view of a gateway at one moment
// (GET /v1/admin/gateways): the acknowledged seq against the current one.
type GatewayState struct {
	Gateway string
	Acked   uint64
	Seq     uint64
	Silent  bool
	At      Time
}

// Fault is something the test did to a part: "kill", "stop", "cont",
// "restart", "close", "blackhole", "heal", "broker-fault", "broker-heal".
type Fault struct {
	Kind   string
	Target string
	At     Time
}

// Snapshot is the event log at one moment, every slice sorted by time. It
// is plain data: the checkers read it, and tests build one by hand.
type Snapshot struct {
	Fetches        []Fetch
	Grants         []Grant
	Revokes        []Revoke
	Calls          []Call
	Commits        []Commit
	ClientFetches  []ClientFetch
	Deliveries     []Delivery
	Produced       []Produced
	SyncAnswers    []SyncAnswer
	SyncPolls      []SyncPoll
	GatewayLeaves  []GatewayLeave
	Partitions     []PartitionState
	GatewayStates  []GatewayState
	Faults         []Fault
	DroppedEntries int // lines a source could not parse
}

// Log collects events from every source of a test. Safe for concurrent
// use.
type Log struct {
	mu      sync.Mutex
	s       Snapshot
	pending map[commitID]int // index in s.Commits of commits not answered yet
}

// NewLog returns an empty log.
func NewLog() *Log { return &Log{} }

func (l *Log) add(fn func(s *Snapshot)) {
	l.mu.Lock()
	fn(&l.s)
	l.mu.Unlock()
}

// AddFetch records a gateway trace line.
func (l *Log) AddFetch(f Fetch) { l.add(func(s *Snapshot) { s.Fetches = append(s.Fetches, f) }) }

// AddProduced records an acknowledged record.
func (l *Log) AddProduced(p Produced) {
	l.add(func(s *Snapshot) { s.Produced = append(s.Produced, p) })
}

// AddSyncAnswer records a sync answer on its way to a gateway.
func (l *Log) AddSyncAnswer(a SyncAnswer) {
	l.add(func(s *Snapshot) { s.SyncAnswers = append(s.SyncAnswers, a) })
}

// AddSyncPoll records a gateway's poll.
func (l *Log) AddSyncPoll(p SyncPoll) {
	l.add(func(s *Snapshot) { s.SyncPolls = append(s.SyncPolls, p) })
}

// AddGatewayLeave records a gateway's leave.
func (l *Log) AddGatewayLeave(g GatewayLeave) {
	l.add(func(s *Snapshot) { s.GatewayLeaves = append(s.GatewayLeaves, g) })
}

// MarkNotLeader records that the replica the poll p (recorded when it
// was forwarded: a poll parked at the leader may be answered after the
// last snapshot) answered 421 not_leader.
func (l *Log) MarkNotLeader(p SyncPoll) {
	l.add(func(s *Snapshot) {
		for i := len(s.SyncPolls) - 1; i >= 0; i-- {
			if q := &s.SyncPolls[i]; q.Gateway == p.Gateway && q.Arrived == p.Arrived && q.Forwarded == p.Forwarded {
				q.NotLeader = true
				return
			}
		}
	})
}

// AddPartitionState records an observation of the coordinator.
func (l *Log) AddPartitionState(p PartitionState) {
	l.add(func(s *Snapshot) { s.Partitions = append(s.Partitions, p) })
}

// AddGatewayState records an observation of the coordinator.
func (l *Log) AddGatewayState(g GatewayState) {
	l.add(func(s *Snapshot) { s.GatewayStates = append(s.GatewayStates, g) })
}

// AddFault records a fault the test injected (or healed) now.
func (l *Log) AddFault(kind, target string) {
	f := Fault{Kind: kind, Target: target, At: Now()}
	l.add(func(s *Snapshot) { s.Faults = append(s.Faults, f) })
}

// Dropped counts a line a source could not parse.
func (l *Log) Dropped() { l.add(func(s *Snapshot) { s.DroppedEntries++ }) }

// Snapshot copies the log, each slice sorted by time (stable, so events
// of one source keep their order).
func (l *Log) Snapshot() Snapshot {
	l.mu.Lock()
	s := Snapshot{
		Fetches: slices.Clone(l.s.Fetches), Grants: slices.Clone(l.s.Grants), Revokes: slices.Clone(l.s.Revokes),
		Calls: slices.Clone(l.s.Calls), Commits: slices.Clone(l.s.Commits), ClientFetches: slices.Clone(l.s.ClientFetches),
		Deliveries: slices.Clone(l.s.Deliveries), Produced: slices.Clone(l.s.Produced),
		SyncAnswers: slices.Clone(l.s.SyncAnswers), SyncPolls: slices.Clone(l.s.SyncPolls), GatewayLeaves: slices.Clone(l.s.GatewayLeaves),
		Partitions: slices.Clone(l.s.Partitions), GatewayStates: slices.Clone(l.s.GatewayStates),
		Faults: slices.Clone(l.s.Faults), DroppedEntries: l.s.DroppedEntries,
	}
	l.mu.Unlock()
	s.Sort()
	return s
}

// Sort orders every slice by time (stable).
func (s *Snapshot) Sort() {
	slices.SortStableFunc(s.Fetches, func(a, b Fetch) int { return cmp.Compare(a.Start, b.Start) })
	slices.SortStableFunc(s.Grants, func(a, b Grant) int { return cmp.Compare(a.At, b.At) })
	slices.SortStableFunc(s.Revokes, func(a, b Revoke) int { return cmp.Compare(a.At, b.At) })
	slices.SortStableFunc(s.Calls, func(a, b Call) int { return cmp.Compare(a.Sent, b.Sent) })
	slices.SortStableFunc(s.Commits, func(a, b Commit) int { return cmp.Compare(a.Sent, b.Sent) })
	slices.SortStableFunc(s.ClientFetches, func(a, b ClientFetch) int { return cmp.Compare(a.Sent, b.Sent) })
	slices.SortStableFunc(s.Deliveries, func(a, b Delivery) int { return cmp.Compare(a.At, b.At) })
	slices.SortStableFunc(s.Produced, func(a, b Produced) int { return cmp.Compare(a.At, b.At) })
	slices.SortStableFunc(s.SyncAnswers, func(a, b SyncAnswer) int { return cmp.Compare(a.At, b.At) })
	slices.SortStableFunc(s.SyncPolls, func(a, b SyncPoll) int { return cmp.Compare(a.Arrived, b.Arrived) })
	slices.SortStableFunc(s.GatewayLeaves, func(a, b GatewayLeave) int { return cmp.Compare(a.Sent, b.Sent) })
	slices.SortStableFunc(s.Partitions, func(a, b PartitionState) int { return cmp.Compare(a.At, b.At) })
	slices.SortStableFunc(s.GatewayStates, func(a, b GatewayState) int { return cmp.Compare(a.At, b.At) })
	slices.SortStableFunc(s.Faults, func(a, b Fault) int { return cmp.Compare(a.At, b.At) })
}

// Groups lists the groups the snapshot's grants and deliveries name,
// sorted.
func (s *Snapshot) Groups() []string {
	seen := map[string]bool{}
	for _, g := range s.Grants {
		seen[g.Key.Group] = true
	}
	for _, d := range s.Deliveries {
		seen[d.Key.Group] = true
	}
	return slices.Sorted(maps.Keys(seen))
}
