package group

import (
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/assign"
)

// group is one consumer group.
type group struct {
	name      string
	cfg       GroupConfig
	members   map[string]*member
	instances map[string]*member // by instance id
	parts     map[assign.Partition]*partition
	order     []*partition // parts sorted by topic, partition
	// subscribed counts, per topic, the members that may be assigned it.
	subscribed map[string]int
	created    map[string]int32 // partitions created so far, per topic
	leased     map[assign.Partition]*partition
	target     assign.Assignment // last assignor output
	input      assign.Input      // reused assignor input buffers
	// Creeping: moves wait here until nextMoveAt.
	pendingMoves []*partition
	nextMoveAt   time.Time
	moveArmed    bool
	reassign     bool // queued for reassignment at the end of the step
}

// member is a live group member; a dead one is removed at once.
type member struct {
	group          *group
	id             string
	instanceID     string
	clientID       string
	topics         []string
	pattern        *regexp.Regexp
	patternText    string
	resolved       map[string]bool // topics it may be assigned
	sessionTimeout time.Duration
	lastContact    time.Time
	removed        bool
	sessionArmed   bool
	// A held heartbeat, answered when news arrives or the wait ends.
	wait       hold
	news       news
	newsQueued bool
	held       map[*partition]struct{} // partitions whose holder it is
}

// news is what a member's next heartbeat reply carries. Grants and
// renewals are rendered from the partition when delivered, so a renewal
// of an undelivered grant just moves its expiry.
type news struct {
	revoke []api.PartitionRef
	grants map[*partition]struct{}
	renew  map[*partition]struct{}
}

func (n *news) empty() bool {
	return len(n.revoke) == 0 && len(n.grants) == 0 && len(n.renew) == 0
}

func (n *news) addGrant(p *partition) {
	if n.grants == nil {
		n.grants = make(map[*partition]struct{})
	}
	delete(n.renew, p)
	n.grants[p] = struct{}{}
}

func (n *news) addRenewal(p *partition) {
	if _, ok := n.grants[p]; ok {
		return
	}
	if n.renew == nil {
		n.renew = make(map[*partition]struct{})
	}
	n.renew[p] = struct{}{}
}

// drop removes an undelivered grant or renewal for p.
func (n *news) drop(p *partition) {
	delete(n.grants, p)
	delete(n.renew, p)
}

// forcing is a pending admin action on a partition, applied by the next
// reassignment.
type forcing uint8

const (
	forceNone   forcing = iota
	forceRevoke         // move even to the same holder (new epoch)
	forceReset          // as forceRevoke, and the holder's commits are refused
)

// partition is one (group, topic, partition).
type partition struct {
	group *group
	id    assign.Partition
	// epoch is the highest epoch ever fenced or granted; it only rises.
	epoch         uint64
	state         PartitionState
	holder        string
	holderOutside bool
	holderEpoch   uint64
	// capExpiry is the latest expiry issued to the holder (renewals);
	// expiryBound bounds every capability of the holder at holderEpoch.
	capExpiry   time.Time
	expiryBound time.Time
	// grantSent: a message carrying the holder's grant left the machine,
	// so a capability at holderEpoch may exist.
	grantSent bool
	// Revoking only.
	target        string
	targetOutside bool
	started       time.Time
	fenceSeq      uint64
	gatewaysSafe  bool
	released      bool
	forced        bool
	force         forcing
	// givenUp: the holder released the partition while it still owned it
	// (it stopped on a 409 that was not a fence, e.g. its jti was
	// denied). The next startMove begins already released.
	givenUp       bool
	committed     int64 // -1: nothing committed
	metadata      string
	lease         *lease
	revokeWaiters []Ref
	leaseWaiter   Ref
	dirty         bool
	offsetDirty   bool
	audit         partitionAudit
}

// lease is an admin pin of a partition to a holder.
type lease struct {
	holder  string
	outside bool
	until   time.Time
}

// gateway is a gateway known from its polls.
type gateway struct {
	id           string
	acked        uint64
	lastSeen     time.Time
	silenceArmed bool
	wait         hold   // a held poll
	parkedAfter  uint64 // the held poll's after
}

// hold is a held long poll (heartbeat or sync poll) and its wait timer.
// At most one wait timer is armed per hold unless the wait shortens.
type hold struct {
	held    bool
	ref     Ref
	until   time.Time
	armed   bool      // a wait timer is in the heap
	armedAt time.Time // when it fires
}

// park holds ref until `until` and reports whether a wait timer must be
// pushed at `until`.
func (h *hold) park(ref Ref, until time.Time) bool {
	h.held, h.ref, h.until = true, ref, until
	if h.armed && !until.Before(h.armedAt) {
		return false
	}
	h.armed, h.armedAt = true, until
	return true
}

// fire handles the hold's wait timer at now: due means answer it now,
// rearm means push a timer at h.until.
func (h *hold) fire(now time.Time) (due, rearm bool) {
	h.armed = false
	switch {
	case !h.held:
		return false, false
	case now.Before(h.until):
		h.armed, h.armedAt = true, h.until
		return false, true
	}
	return true, false
}

type memberKey struct {
	group, member string
}

func (p *partition) ref(epoch uint64) api.PartitionRef {
	return api.PartitionRef{Topic: p.id.Topic, Partition: p.id.Partition, Epoch: epoch}
}

func (p *partition) fence() api.Fence {
	return api.Fence{Group: p.group.name, Topic: p.id.Topic, Partition: p.id.Partition, Epoch: p.epoch}
}

func (p *partition) record() PartitionRecord {
	return PartitionRecord{
		Group: p.group.name, Topic: p.id.Topic, Partition: p.id.Partition,
		Epoch: p.epoch, State: p.state,
		Holder: p.holder, HolderOutside: p.holderOutside, HolderEpoch: p.holderEpoch,
		Target: p.target, TargetOutside: p.targetOutside,
		RevokeStarted: p.started, Released: p.released, Forced: p.forced,
	}
}

func (mem *member) record() MemberRecord {
	return MemberRecord{
		Group: mem.group.name, MemberID: mem.id, InstanceID: mem.instanceID,
		ClientID: mem.clientID, Topics: mem.topics, TopicPattern: mem.patternText,
		SessionTimeout: mem.sessionTimeout,
	}
}

func newGroup(name string, cfg GroupConfig) *group {
	return &group{
		name:       name,
		cfg:        cfg,
		members:    make(map[string]*member),
		instances:  make(map[string]*member),
		parts:      make(map[assign.Partition]*partition),
		subscribed: make(map[string]int),
		created:    make(map[string]int32),
		leased:     make(map[assign.Partition]*partition),
	}
}

// partition returns the partition, creating it (unowned, epoch 0).
func (g *group) partition(id assign.Partition) *partition {
	if p := g.parts[id]; p != nil {
		return p
	}
	p := &partition{group: g, id: id, state: Unowned, committed: -1, audit: partitionAudit{committed: -1}}
	g.parts[id] = p
	i, _ := slices.BinarySearchFunc(g.order, id, func(q *partition, id assign.Partition) int {
		return comparePartitions(q.id, id)
	})
	g.order = slices.Insert(g.order, i, p)
	return p
}

func comparePartitions(a, b assign.Partition) int {
	switch {
	case a.Less(b):
		return -1
	case b.Less(a):
		return 1
	}
	return 0
}

// isMember reports whether id is a live member of g.
func (g *group) isMember(id string) bool {
	_, ok := g.members[id]
	return ok
}

// describe renders the partition for panics and invariant errors.
func (p *partition) describe() string {
	return fmt.Sprintf("%s/%s/%d{epoch=%d state=%s holder=%q outside=%t holderEpoch=%d target=%q fenceSeq=%d safe=%t released=%t}",
		p.group.name, p.id.Topic, p.id.Partition, p.epoch, p.state, p.holder, p.holderOutside,
		p.holderEpoch, p.target, p.fenceSeq, p.gatewaysSafe, p.released)
}
