package group

import (
	"fmt"
	"slices"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/assign"
	"github.com/capgate/capgate/internal/topicpattern"
)

// group is one consumer group.
type group struct {
	name      string
	cfg       GroupConfig
	members   map[string]*member
	instances map[string]*member // by instance id
	parts     map[assign.Partition]*partition
	order     []*partition // parts sorted by topic, partition
	// metadataBytes is metadataCost of its partitions' committed
	// metadata (setCommitted): its share of tally.metadataBytes.
	metadataBytes int64
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
	reassign     bool         // queued for reassignment at the end of the step
	window       assignWindow // the first assignment held back (window.go)
	tally        *tally
	floor        *uint64   // the machine's epoch floor: where new partitions start
	emptySince   time.Time // first reap sweep that found it idle (reap.go)
	deleted      bool      // DeleteGroup hid it until it is reaped (delete.go)
	// creator is the tenant (Join.Tenant) whose join created the group
	// ("" = nobody: an admin's, or created before creators were kept);
	// it holds one of that tenant's limits.groups_per_credential places
	// until the group is deleted or reaped (limits.go).
	creator string
	// creatorName is the creating credential's name (its subject: a
	// client credential's --name, an IdP identity's subject) when it says
	// more than creator and fits creatorNameMax; "" otherwise. Kept with
	// creator so describe names the creator after its members are gone
	// (before, only a live member of that credential gave the name).
	creatorName string
}

// member is a live group member; a dead one is removed at once.
type member struct {
	group       *group
	id          string
	instanceID  string
	clientID    string
	credential  Credential
	charged     int64 // its memberCost in the machine's tally
	topics      []string
	pattern     *topicpattern.Matcher
	patternText string
	patternCost int // topicpattern.Cost(patternText)
	// patternStale: a match of pattern ran over limits.topic_pattern_steps
	// after the member joined (topics were added, or a restore matched
	// it again): resolved keeps what it matched before, less deleted
	// topics, and follows no new topic until it rejoins (topics.go).
	patternStale bool
	// patternUnrestored: a restore did not match pattern (its tenant's
	// restore budget was spent, or the text no longer parses): the
	// member holds no topics, and its next heartbeat removes it,
	// answered unknown_member saying so (heartbeatUnrestored) — it was
	// a member with nothing assigned and no word why.
	patternUnrestored bool
	resolved          map[string]bool // topics it may be assigned
	sessionTimeout    time.Duration
	lastContact       time.Time
	removed           bool
	revoked           bool // removed by an administrator (revokeLiveMember)
	sessionArmed      bool
	// A held heartbeat, answered when news arrives or the wait ends.
	wait       hold
	news       news
	newsQueued bool
	held       map[*partition]struct{} // partitions whose holder it is
	// lastResync is when a resync of its was last honoured; resyncDue, a
	// resync asked for within ResyncEvery of it, honoured at its first
	// heartbeat after (redeliver.go).
	lastResync time.Time
	resyncDue  bool
}

// news is what a member's next heartbeat reply carries. Grants and
// renewals are rendered from the partition when delivered, so a renewal
// of an undelivered grant just moves its expiry.
type news struct {
	revoke []api.PartitionRef
	grants map[*partition]struct{}
	renew  map[*partition]struct{}
	// notBefore: grants and renewals wait until then for the token the
	// shell reserved (DeferNews); revokes never wait. paid: the tokens
	// reserved, handed back in the answer (News.Paid).
	notBefore time.Time
	paid      int
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
	epoch uint64
	// own is the ownership state; only the transitions below assign it.
	own       ownership
	committed int64 // -1: nothing committed
	metadata  string
	// committedEpoch is the epoch of the capability that committed it,
	// or of the holder that released the partition without an offset
	// after (keepOffset) — the epoch whose holder last stood by the
	// offset (0: an admin reset, nothing committed, or unknown).
	committedEpoch uint64
	// offsetKept: the offset record this Ready writes carries only a
	// new committedEpoch (keepOffset), no new offset.
	offsetKept    bool
	lease         *lease
	revokeWaiters []Ref
	leaseWaiter   Ref
	dirty         bool
	offsetDirty   bool
	audit         partitionAudit
}

// holder is who holds, or is to hold, a partition's capability: a group
// member, or (outside) a holder named by an admin lease. The zero holder
// is nobody.
type holder struct {
	id      string
	outside bool
}

func (h holder) none() bool { return h.id == "" }

// member reports whether h is the group member id.
func (h holder) member(id string) bool { return !h.outside && h.id == id }

// capability is what the machine issued to a holder at one epoch.
type capability struct {
	holder holder
	// expiry is the latest expiry issued (renewals); bound bounds every
	// capability issued at this epoch (after a restart: now+max_lease).
	expiry, bound time.Time
	// sent: a message carrying it left the machine, so a capability at
	// this epoch may exist.
	sent bool
	// handed is the expiry of the capability at this epoch last handed
	// to the holder in a join's or heartbeat's answer (zero: none since
	// this machine started — a takeover does not know what the holder
	// has). Only mint pacing's order reads it (Grant.HeldUntil, PaceNews);
	// no decision about safety does.
	handed time.Time
}

// handOut records that g, the holder's capability at this epoch, leaves
// in an answer: g says until when the holder held one before it
// (Grant.HeldUntil), and g's expiry is what it holds now.
func (c *capability) handOut(g *Grant) {
	g.HeldUntil = c.handed
	c.handed = g.ExpiresAt
}

// renew moves the capability's expiry to exp; the bound never falls.
func (c *capability) renew(exp time.Time) {
	c.expiry = exp
	if exp.After(c.bound) {
		c.bound = exp
	}
}

// ownership is a partition's state (DESIGN §4): exactly one of unowned,
// *owned and *revoking, so a revoking field cannot be set on an owned
// partition nor an owner on an unowned one. The transitions below are
// the only code that assigns partition.own.
type ownership interface{ state() PartitionState }

// unowned: nobody holds a capability at any live epoch.
type unowned struct{}

// owned: cap.holder owns the partition at the partition's epoch.
type owned struct {
	cap capability
	// force is a pending admin action, applied by the next reassignment.
	force forcing
	// givenUp: the holder released the partition while it still owned it
	// (it stopped on a 409 that was not a fence, e.g. its jti was
	// denied). The move that follows begins already released.
	givenUp bool
}

// revoking: the epoch was fenced above from's (fromEpoch < epoch); the
// partition goes to `to` (nobody when zero) once every gateway is safe
// for the fence and the previous holder let go.
type revoking struct {
	from         capability
	fromEpoch    uint64
	to           holder
	started      time.Time
	fenceSeq     uint64 // sync seq of the latest fence
	gatewaysSafe bool
	released     bool
	// forced: the previous holder's commits are refused (admin offset
	// reset).
	forced bool
}

func (unowned) state() PartitionState   { return Unowned }
func (*owned) state() PartitionState    { return Owned }
func (*revoking) state() PartitionState { return Revoking }

func (p *partition) state() PartitionState { return p.own.state() }

// owner is the owned state, or nil.
func (p *partition) owner() *owned {
	o, _ := p.own.(*owned)
	return o
}

// revocation is the revoking state, or nil.
func (p *partition) revocation() *revoking {
	r, _ := p.own.(*revoking)
	return r
}

// outstanding is the capability a holder may still use and its epoch:
// the owner's at the partition's epoch, or the revoked holder's; nil when
// unowned.
func (p *partition) outstanding() (*capability, uint64) {
	switch s := p.own.(type) {
	case *owned:
		return &s.cap, p.epoch
	case *revoking:
		return &s.from, s.fromEpoch
	}
	return nil, 0
}

// outstandingOrNil is outstanding of a partition that may be nil.
func (p *partition) outstandingOrNil() (*capability, uint64) {
	if p == nil {
		return nil, 0
	}
	return p.outstanding()
}

// heldBy reports whether member id holds a capability of p (owned or
// being revoked from it).
func (p *partition) heldBy(id string) bool {
	c, _ := p.outstanding()
	return c != nil && c.holder.member(id)
}

// Transitions. Each builds the new state whole, so nothing is carried
// over by accident and nothing needs resetting by hand.

// toOwned makes h the owner at the partition's epoch with a capability
// expiring at exp, not yet sent.
func (p *partition) toOwned(h holder, exp time.Time) *owned {
	if p.own.state() == Owned || h.none() {
		panic("group: grant of a partition that is owned, or to nobody: " + p.describe())
	}
	o := &owned{cap: capability{holder: h, expiry: exp, bound: exp}}
	p.own = o
	return o
}

// toRevoking starts moving an owned partition to `to` at now, before its
// epoch is raised by the fence: a pending forced reset carries over as
// forced, a give-up as released, and a capability never sent needs no
// release (older ones were fenced before it was made).
func (p *partition) toRevoking(to holder, now time.Time) *revoking {
	o := p.owner()
	if o == nil {
		panic("group: revoke of a partition that is not owned: " + p.describe())
	}
	r := &revoking{from: o.cap, fromEpoch: p.epoch, to: to, started: now,
		released: o.givenUp || !o.cap.sent, forced: o.force == forceReset}
	if !o.cap.sent {
		r.from.bound = time.Time{}
	}
	p.own = r
	return r
}

// toUnowned ends a handoff that has nowhere to go.
func (p *partition) toUnowned() {
	if p.own.state() != Revoking {
		panic("group: drop of a partition that is not revoking: " + p.describe())
	}
	p.own = unowned{}
}

// restoreOwnership rebuilds the state from a record after a restart:
// every capability counts as sent, renewable from expiry and bounded by
// bound.
func (p *partition) restoreOwnership(r PartitionRecord, expiry, bound time.Time) error {
	h := holder{id: r.Holder, outside: r.HolderOutside}
	c := capability{holder: h, expiry: expiry, bound: bound, sent: true}
	switch {
	case r.State == Unowned:
		p.own = unowned{}
	case r.State == Owned && r.HolderEpoch == r.Epoch && !h.none() && !r.Released && !r.Forced:
		p.own = &owned{cap: c}
	case r.State == Revoking && r.HolderEpoch < r.Epoch && !h.none():
		p.own = &revoking{from: c, fromEpoch: r.HolderEpoch, to: holder{id: r.Target, outside: r.TargetOutside},
			started: r.RevokeStarted, released: r.Released, forced: r.Forced}
	default:
		return fmt.Errorf("partition %s: inconsistent record %+v", p.describe(), r)
	}
	return nil
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
	instance     string // the process polling under id ("" until one sends its nonce; gateways.go)
	acked        uint64
	lastSeen     time.Time
	silenceArmed bool
	wait         hold      // a held poll
	parkedAfter  uint64    // the held poll's after
	left         bool      // it left: its timers are ignored
	lagging      bool      // in a lagging episode (lag.go), reported once
	registered   time.Time // its first poll (zero when restored): lag counts from there
	conflicts    uint64    // polls and leaves of other instances refused under its id (gateways.go)
	lastConflict time.Time // the last of them
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

func (p *partition) ref(epoch uint64) api.PartitionRef {
	return api.PartitionRef{Topic: p.id.Topic, Partition: p.id.Partition, Epoch: epoch}
}

func (p *partition) fence() api.Fence {
	return api.Fence{Group: p.group.name, Topic: p.id.Topic, Partition: p.id.Partition, Epoch: p.epoch}
}

func (p *partition) record() PartitionRecord {
	r := PartitionRecord{
		Group: p.group.name, Topic: p.id.Topic, Partition: p.id.Partition,
		Epoch: p.epoch, State: p.state(),
	}
	switch s := p.own.(type) {
	case *owned:
		r.Holder, r.HolderOutside, r.HolderEpoch = s.cap.holder.id, s.cap.holder.outside, p.epoch
	case *revoking:
		r.Holder, r.HolderOutside, r.HolderEpoch = s.from.holder.id, s.from.holder.outside, s.fromEpoch
		r.Target, r.TargetOutside = s.to.id, s.to.outside
		r.RevokeStarted, r.Released, r.Forced = s.started, s.released, s.forced
	}
	return r
}

func (mem *member) record() MemberRecord {
	return MemberRecord{
		Group: mem.group.name, MemberID: mem.id, InstanceID: mem.instanceID,
		ClientID: mem.clientID, Topics: mem.topics, TopicPattern: mem.patternText,
		SessionTimeout: mem.sessionTimeout, Credential: mem.credential,
	}
}

func newGroup(name string, cfg GroupConfig, t *tally, floor *uint64) *group {
	t.groups++
	return &group{
		tally:      t,
		floor:      floor,
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
	p := &partition{group: g, id: id, epoch: *g.floor, own: unowned{}, committed: -1,
		audit: partitionAudit{committed: -1, maxEpoch: *g.floor}}
	g.parts[id] = p
	g.tally.partitions++
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
	base := fmt.Sprintf("%s/%s/%d{epoch=%d state=%s", p.group.name, p.id.Topic, p.id.Partition, p.epoch, p.state())
	switch s := p.own.(type) {
	case *owned:
		return base + fmt.Sprintf(" holder=%q outside=%t sent=%t}", s.cap.holder.id, s.cap.holder.outside, s.cap.sent)
	case *revoking:
		return base + fmt.Sprintf(" from=%q outside=%t fromEpoch=%d to=%q fenceSeq=%d safe=%t released=%t forced=%t}",
			s.from.holder.id, s.from.holder.outside, s.fromEpoch, s.to.id, s.fenceSeq, s.gatewaysSafe, s.released, s.forced)
	}
	return base + "}"
}
