package group

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/assign"
	"github.com/capgate/capgate/revocation"
)

// Ready is what the shell must do after a Step or Tick: write Persist
// durably (one synchronous transaction), then send Messages, then Advance.
type Ready struct {
	Persist  []Record
	Messages []Message
}

// Machine is the coordinator's state machine for every group, the sync
// log and the gateways. It is not safe for concurrent use: one goroutine
// owns it.
type Machine struct {
	cfg    Config
	rng    *rand.Rand
	lookup func(string) (assign.Func, bool)
	now    time.Time

	groups map[string]*group
	// names: every key of groups, sorted — a tenant's group listing is
	// binary searches into it (GroupsMatching); sorting the keys at each
	// listing was 12 ms of the loop at 10,000 groups (redteam14 #3).
	names  []string
	topics map[string]int32
	// topicNames: the keys of topics at a version, read by the shell
	// outside the loop to match join patterns (topicnames.go).
	topicNames *TopicNames
	// patternSteps counts the topicpattern steps the machine's own
	// matching took (matchesOf, topicsChanged, Restore): bounded per
	// join, per tenant per topic change, per tenant at a restore.
	patternSteps int64
	gateways     map[string]*gateway
	log          syncLog
	// revocations holds the denied ids and revoked members (their fences
	// are the partitions' epochs), under the one expiry rule.
	revocations *revocation.Set
	// credentials: the live members each credential id opened.
	credentials map[string]*credential
	// tenantGroups: per tenant (Credential.tenant), its live members per
	// group; limits.groups_per_credential bounds the groups.
	tenantGroups map[string]map[*group]int
	// created: per tenant (Join.Tenant), the groups its joins created
	// that still exist (group.creator); their state estimate is the
	// tenant's share of state_bytes (tenantStateBytes).
	created map[string]map[*group]struct{}
	// memberBytes: per tenant (Credential.tenant), the memberCost of its
	// live members — also in its share of state_bytes (tenantStateBytes).
	memberBytes map[string]int64
	tally       tally // the state estimate limits.state_bytes bounds
	// heldHeartbeats: per tenant (Credential.tenant), its members'
	// heartbeats held now; limits.held_heartbeats_per_tenant bounds it.
	heldHeartbeats map[string]int
	// memberTenants: every live member's tenant, read by the shell
	// outside the loop (tenantindex.go).
	memberTenants *MemberTenants
	// livePatterns: every live pattern member's text per tenant, read
	// by the shell outside the loop (livepatterns.go).
	livePatterns *LivePatterns
	// epochFloor is the highest epoch of every reaped partition: a new
	// partition starts there, so its first grant is above them all.
	epochFloor uint64
	sweepArmed bool // a reap sweep timer is in the heap
	qos        map[string]api.QoSOverride
	timers     timerHeap
	handoffs   handoffQueue
	lag        lagState // the lag rule's timer and notices (lag.go)

	watermark      uint64
	watermarkValid bool

	// Work queued during a step, done by finish.
	reassignQueue []*group
	windowsDue    []*group // join windows whose timer fired (window.go)
	newsQueue     []*member
	joins         []pendingJoin
	logGrew       bool
	seqDirty      bool

	ready      Ready
	persistIdx map[recordKey]int
	dirtyParts []*partition
	dirtyOffs  []*partition
	inFlight   bool

	audit       audit
	plantUnsafe bool // PlantUnsafeReady
}

type pendingJoin struct {
	ref     Ref
	member  *member
	created bool // JoinReply.Created
}

// recordKey deduplicates records within one Ready.
type recordKey struct {
	kind         uint8
	first, other string
	number       int32
}

const (
	keyPartition uint8 = iota
	keyOffset
	keyMember
	keyGroup
	keyLease
	keyDenied
	keyRevoked
	keyQoS
	keyGateway
	keySyncSeq
	keyTopic
)

// assignorLookup resolves assignor names; tests may replace it.
var assignorLookup = assign.Lookup

// New returns an empty machine. rng draws member ids; pass a seeded source
// for reproducible runs.
func New(cfg Config, rng *rand.Rand) (*Machine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if rng == nil {
		return nil, fmt.Errorf("group: new machine: nil rng")
	}
	m := &Machine{
		cfg:            cfg,
		rng:            rng,
		lookup:         assignorLookup,
		groups:         make(map[string]*group),
		topics:         make(map[string]int32),
		gateways:       make(map[string]*gateway),
		revocations:    revocation.New(revocation.Rule{Leeway: cfg.Leeway, MaxClockSkew: cfg.MaxClockSkew, Retain: cfg.RenewTokenGrace}),
		credentials:    make(map[string]*credential),
		created:        make(map[string]map[*group]struct{}),
		memberBytes:    make(map[string]int64),
		tenantGroups:   make(map[string]map[*group]int),
		heldHeartbeats: make(map[string]int),
		memberTenants:  newMemberTenants(),
		livePatterns:   newLivePatterns(),
		topicNames:     newTopicNames(),
		qos:            make(map[string]api.QoSOverride),
		persistIdx:     make(map[recordKey]int),
		timers:         newTimerHeap(),
	}
	m.log.init(cfg.SyncLogMax, 1)
	m.seqDirty = true
	m.materialize()
	return m, nil
}

// Step applies one event at now. Timers due at now fire first. A now
// earlier than a previous one is taken as the previous one.
func (m *Machine) Step(now time.Time, ev Event) {
	m.setTime(now)
	m.apply(ev)
	m.finish()
}

// StepMany applies events in order at now, then does the work they queued
// (reassignment, join replies, news, sync answers) once. Under load the
// shell drains its queue into one StepMany: a storm of joins then costs
// one reassignment per group instead of one per join. Each event still
// gets exactly one reply.
func (m *Machine) StepMany(now time.Time, evs []Event) {
	m.setTime(now)
	for _, ev := range evs {
		m.apply(ev)
	}
	m.finish()
}

func (m *Machine) apply(ev Event) {
	switch e := ev.(type) {
	case Join:
		m.join(e)
	case Heartbeat:
		m.heartbeat(e)
	case Commit:
		m.commit(e)
	case Leave:
		m.leave(e)
	case UndoJoin:
		m.undoJoin(e)
	case RedeliverNews:
		m.redeliverNews(e)
	case DeferNews:
		m.deferNews(e)
	case Topics:
		m.updateTopics(e)
	case DeferredHits:
		m.deferredHits(e)
	case SyncPoll:
		m.syncPoll(e)
	case GatewayLeave:
		m.gatewayLeave(e)
	case KeysChanged:
		m.appendEntry(syncEntry{kind: entryKeys})
	case RevokePartition:
		m.revokePartition(e)
	case Lease:
		m.leasePartition(e)
	case DenyJTI:
		m.deny(e.Ref, []Denial{{JTI: e.JTI, Expires: e.Expires}})
	case DenyJTIs:
		m.deny(e.Ref, e.Denials)
	case RevokeMember:
		m.revokeMember(e)
	case PutQoS:
		m.putQoS(e)
	case SetGroupConfig:
		m.setGroupConfig(e)
	case ResetOffset:
		m.resetOffset(e)
	case DeleteGroup:
		m.deleteGroup(e)
	default:
		panic(fmt.Sprintf("group: unknown event %T", ev))
	}
}

// Tick fires the timers due at now.
func (m *Machine) Tick(now time.Time) {
	m.setTime(now)
	m.finish()
}

func (m *Machine) setTime(now time.Time) {
	if now.After(m.now) {
		m.now = now
		m.watermarkValid = false
	}
	m.runTimers()
}

// HasReady reports whether Ready has anything to persist or send.
func (m *Machine) HasReady() bool {
	return len(m.ready.Persist) > 0 || len(m.ready.Messages) > 0
}

// Ready hands over everything to persist and send since the last Ready.
// The shell persists Persist durably, then sends Messages, then calls
// Advance; Ready may not be called again before Advance.
//
// Ready fails closed: once the safety audit found a violation (in this
// Ready, or in any step since the machine was made) it returns an empty
// Ready and the violation, now and on every later call. The shell then
// persists and sends nothing, and stops using the machine.
func (m *Machine) Ready() (Ready, error) {
	if m.inFlight {
		panic("group: Ready called again before Advance")
	}
	r := m.ready
	m.ready = Ready{}
	clear(m.persistIdx)
	if m.plantUnsafe {
		r.Persist = slices.DeleteFunc(r.Persist, func(rec Record) bool { _, ok := rec.(PartitionRecord); return ok })
	}
	m.audit.checkReady(m, r)
	if m.audit.err != nil {
		return Ready{}, fmt.Errorf("%w: %w", ErrUnsafe, m.audit.err)
	}
	m.inFlight = true
	return r, nil
}

// ErrUnsafe marks a Ready refused because the machine's safety audit
// failed.
var ErrUnsafe = errors.New("group: safety audit failed")

// PlantUnsafeReady is a deliberate safety bug for tests that prove the
// audit refuses a Ready and the shell sends nothing of it: from now on
// every Ready leaves its partition records out, so the first message
// mentioning a new epoch mentions one that was never persisted. Never
// call it outside tests.
func (m *Machine) PlantUnsafeReady() { m.plantUnsafe = true }

// Advance tells the machine the last Ready was persisted and sent.
func (m *Machine) Advance() {
	m.inFlight = false
}

// finish does the work queued during a step: reassignments, join replies,
// news to held heartbeats, sync replies to held polls, and the records to
// persist.
func (m *Machine) finish() {
	m.armSweep(m.sweepInterval())
	m.closeWindows()
	for len(m.reassignQueue) > 0 {
		g := m.reassignQueue[0]
		m.reassignQueue = m.reassignQueue[1:]
		g.reassign = false
		m.reassignGroup(g)
	}
	for _, j := range m.joins {
		m.replyJoin(j)
	}
	m.joins = m.joins[:0]
	for _, mem := range m.newsQueue {
		mem.newsQueued = false
		m.flushNews(mem)
	}
	m.newsQueue = m.newsQueue[:0]
	if m.logGrew {
		m.logGrew = false
		m.answerParkedPolls()
	}
	m.materialize()
}

func (m *Machine) send(msg Message) {
	m.ready.Messages = append(m.ready.Messages, msg)
}

func (m *Machine) reject(ref Ref, code api.Code, format string, args ...any) {
	m.send(Rejected{Ref: ref, Code: code, Message: fmt.Sprintf(format, args...)})
}

// rejectWith is reject with details in the error body.
func (m *Machine) rejectWith(ref Ref, details map[string]any, code api.Code, format string, args ...any) {
	m.send(Rejected{Ref: ref, Code: code, Message: fmt.Sprintf(format, args...), Details: details})
}

func (m *Machine) push(t timer) {
	m.timers.Push(t)
}

func (m *Machine) queueReassign(g *group) {
	if !g.reassign {
		g.reassign = true
		m.reassignQueue = append(m.reassignQueue, g)
	}
}

func (m *Machine) queueNews(mem *member) {
	if !mem.newsQueued && !mem.removed {
		mem.newsQueued = true
		m.newsQueue = append(m.newsQueue, mem)
	}
}

// group returns the named group, creating it with default configuration
// (or bringing a deleted one back, empty).
func (m *Machine) group(name string) *group {
	g := m.groups[name]
	if g != nil && g.deleted {
		g.deleted = false
	}
	if g == nil {
		g = newGroup(name, m.cfg.groupDefaults(), &m.tally, &m.epochFloor)
		m.groups[name] = g
		i, _ := slices.BinarySearch(m.names, name)
		m.names = slices.Insert(m.names, i, name)
		m.putGroup(g)
	}
	return g
}

// putRecord adds r to the pending Persist, replacing a record with the
// same key.
func (m *Machine) putRecord(key recordKey, r Record) {
	if i, ok := m.persistIdx[key]; ok {
		m.ready.Persist[i] = r
		return
	}
	m.persistIdx[key] = len(m.ready.Persist)
	m.ready.Persist = append(m.ready.Persist, r)
}

func (m *Machine) markDirty(p *partition) {
	if !p.dirty {
		p.dirty = true
		m.dirtyParts = append(m.dirtyParts, p)
	}
}

func (m *Machine) markOffset(p *partition) {
	p.group.emptySince = time.Time{} // a changed offset restarts limits.offsets_retention
	if !p.offsetDirty {
		p.offsetDirty = true
		m.dirtyOffs = append(m.dirtyOffs, p)
	}
}

// materialize turns the dirty partitions, offsets and sync seq into
// records, in a stable order.
func (m *Machine) materialize() {
	byKey := func(a, b *partition) int {
		if c := strings.Compare(a.group.name, b.group.name); c != 0 {
			return c
		}
		return comparePartitions(a.id, b.id)
	}
	slices.SortFunc(m.dirtyParts, byKey)
	for _, p := range m.dirtyParts {
		p.dirty = false
		m.putRecord(recordKey{kind: keyPartition, first: p.group.name, other: p.id.Topic, number: p.id.Partition}, p.record())
	}
	m.dirtyParts = m.dirtyParts[:0]
	slices.SortFunc(m.dirtyOffs, byKey)
	for _, p := range m.dirtyOffs {
		p.offsetDirty = false
		m.putRecord(recordKey{kind: keyOffset, first: p.group.name, other: p.id.Topic, number: p.id.Partition}, OffsetRecord{
			Group: p.group.name, Topic: p.id.Topic, Partition: p.id.Partition,
			Offset: p.committed, Metadata: p.metadata, Epoch: p.committedEpoch, Kept: p.offsetKept,
		})
		p.offsetKept = false
	}
	m.dirtyOffs = m.dirtyOffs[:0]
	if m.seqDirty {
		m.seqDirty = false
		m.putRecord(recordKey{kind: keySyncSeq}, SyncSeqRecord{Seq: m.log.seq})
	}
}

// expiry is a capability expiry lease from now, in whole seconds, never
// later than now+lease.
func (m *Machine) expiry(lease time.Duration) time.Time {
	return time.Unix(m.now.Add(lease).Unix(), 0).UTC()
}
