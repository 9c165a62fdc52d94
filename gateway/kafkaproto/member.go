package kafkaproto

// A Kafka group member is one capgate member: this gateway joins the
// coordinator for it with the client's credential and runs the consumer
// SDK's own logic on its behalf — client/driver (joins and rejoins, one
// long-poll heartbeat, retries and backoffs) around client/session (the
// pure core: grants, renewals, revokes, release with the old capability)
// — so there is one model of the consumer protocol. Only the fetches are
// the listener's own (the driver's doc names this shell): the Kafka client
// fetches records itself, through this listener, and commits explicit
// offsets. So the driver's fetch requests become progress slots:
//
//   - A Send{Kind: Fetch} for a partition opens a slot (no IO). When the
//     client commits offset X for that partition, the slot is answered
//     with Next = X, polled and committed at once: the session's processed
//     offset is the client's committed offset, and the driver commits it
//     through the coordinator with the partition's current capability.
//   - A revoke from the coordinator is held back (deferred) while the
//     client still owns the partition in its last assignment: the client
//     is first told its new assignment, commits what it processed (kgo
//     and KafkaJS do so before giving partitions up) and acknowledges
//     (its next heartbeat or join no longer lists it). Only then the revoke
//     is stepped: the session releases the partition with that offset and
//     the old capability, and the coordinator hands it on. A client that
//     never acknowledges is revoked after its rebalance timeout; the
//     coordinator's handoff_timeout bounds the wait anyway.
//   - Liveness: the gateway keeps the capgate member alive (the driver's
//     long-poll heartbeats) while the Kafka client heartbeats within its
//     session timeout. A client silent longer is closed on its behalf:
//     its partitions are released at its last committed offsets and the
//     member leaves; the client, if it ever wakes up, is told
//     UNKNOWN_MEMBER_ID and its fetches of those partitions are refused.
//   - A partition granted again under the client (a new epoch it was not
//     told of — an administrator's offsets reset fences it and grants it
//     back from the reset offset at once) is told again (retell): out of
//     the client's assignment, its fetches paused and its commits refused
//     until the client gave it up, then handed back, so the client reads
//     from the committed offset and never commits its old position over
//     the reset. Only a carry-over's own regrant from an offset the
//     member committed (refenceMark) keeps the client's position.

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client/driver"
	"github.com/capgate/capgate/client/session"
	"github.com/capgate/capgate/internal/coordinators"
)

// memberState is a member's lifecycle on this gateway.
type memberState uint8

const (
	// memberJoining: the first join is under way (start); the Kafka
	// client waits in its join request, so liveness does not count yet.
	memberJoining memberState = iota
	memberActive
	memberClosing // leaving on the client's behalf or at its request
	memberGone    // left, lost or expired: answers UNKNOWN_MEMBER_ID
)

// errMemberEnded ends a first join whose member ended before the driver
// reported the join's outcome (the session stopped; start's context
// ended with nothing left for the driver to cancel): the client is
// answered as for a coordinator it cannot reach, and retries.
var errMemberEnded = errors.New("kafkaproto: the member ended before its join was answered")

// deferredRevoke is a coordinator revoke waiting for the client to give
// the partition up. A refence revoke is the fence of a carry-over's
// rejoin (carryOver): the partition comes straight back to this member
// under the next epoch, so the client is not told (mark: the carry-over's
// mark of it, which the regrant is checked against); if no regrant came
// within the rebalance timeout it becomes an ordinary deferred revoke.
type deferredRevoke struct {
	ref     api.PartitionRef
	at      time.Time
	refence bool
	mark    refenceMark
}

// refenceMark is a partition as a carry-over's rejoin found it: its
// epoch, and the offset the coordinator had confirmed committed. The
// rejoin's regrant starts at the coordinator's committed offset, which
// only this member's commits moved meanwhile: that one, or one the
// member sent since or had in flight (member.commitsSent; carries). A
// regrant from any other offset was set by someone else — an
// administrator's offsets reset fenced the partition under the carry-over
// — and the client is told again (retell), as of any regrant under it.
type refenceMark struct {
	epoch     uint64
	committed int64
}

// carries reports whether a regrant starting at offset continues the
// client's position: the offset committed at the mark, or one of the
// member's last commits sent.
func (mk refenceMark) carries(offset int64, sent []int64) bool {
	return offset == mk.committed || slices.Contains(sent, offset)
}

// commitsSentMax bounds member.commitsSent per partition: a carry-over's
// fence stops commits within a few round trips; a regrant from an offset
// sent longer ago is only told again (a rebalance, never a lost reset).
const commitsSentMax = 8

// member is one Kafka group member's capgate session on this gateway.
type member struct {
	g      *groups
	group  string
	id     string // the Kafka member id
	key    clientKey
	holder holderKey // key's holder by name (groups.renewalPending)
	// placed orders the registered members (groups.placed); place: what
	// became of its place (lent to another tenant's join, which closes it
	// once answered; passed to its own client's rejoin: groups.takePlace).
	// Both under groups.mu.
	placed           uint64
	place            placeState
	kip848           bool
	cooperative      bool // classic protocol: revoke only what moves
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	credential       string // the client's latest (under mu once started)
	carrying         bool   // a carryOver's rejoin is in flight (under mu)
	// heldBeat is a heartbeat the driver sent while a carry-over's rejoin
	// was in flight, held back until the rejoin is answered and then sent
	// with the member token it answered (heldFor: the incarnation it was
	// sent for). Sent at once with the token of the credential being
	// replaced — about to expire — the coordinator minted the rejoin's
	// regrant against it and dropped it (no capability outlives its
	// member token) while counting it sent: the partitions stayed fenced
	// until their renewal, ~2 s later. Under mu.
	heldBeat *driver.Send
	heldFor  uint64
	// refencing: the mark (epoch, position) of each partition the member
	// held when a carry-over's rejoin was sent. The rejoin fences what the
	// coordinator had granted the member when it arrived: that epoch, or a
	// later one whose grant was still on its way or never delivered (a
	// grant minted against a member token about to expire is dropped). So
	// a revoke of one of them at that epoch or a later one is the
	// carry-over's fence (deferredRevoke.refence). It lasts until every
	// revoke the rejoin made has arrived: until the answer of a heartbeat
	// sent after the rejoin was answered (refenceEnds). Under mu.
	refencing map[session.Partition]refenceMark
	// heartbeats counts the heartbeats sent; refenceEnds is the number of
	// the first one whose answer ends refencing (0 while a carry-over's
	// rejoin is in flight, or none is pending). Under mu.
	heartbeats, refenceEnds uint64
	// renewing: the partitions the client owned (its last assignment
	// minus held revokes) when the member was renewed as a new capgate
	// member (carryOver: a credential bound by its jti). The renewal
	// releases them at the client's committed offsets, leaves and joins
	// again; a partition granted back to the new member at that offset (nobody
	// else committed it meanwhile) stays the client's, unannounced, as a
	// KIP-368 re-authentication leaves a Kafka consumer's assignment and
	// positions alone. Until then it stays in the client's assignment
	// (target), its fetches are refused retriably and its commits wait
	// (commit); once the join is answered, one it did not grant leaves
	// the assignment and the client is told as of any change. At most
	// until renewUntil (the rebalance timeout). renewWake, when set, is
	// closed at the end of each carry (a commit waits on it). Under mu.
	renewing   map[session.Partition]int64 // the offset released at
	renewUntil time.Time
	renewWake  chan struct{}
	// retell: partitions the client holds whose position no longer
	// counts, because they were granted again under it at an offset of
	// someone else's: an administrator's offsets reset (the coordinator
	// fences the holder and grants the partition back from the reset
	// offset: regranted), or a renewal's regrant at another offset than
	// the one released (renewSettled). Kept out of the client's assignment
	// until it no longer owns them (acked), then handed to it again: it
	// reads on from the committed offset. Meanwhile its commits are
	// refused as stale and its fetches answered empty (capability), so
	// nothing it read before the regrant moves the committed offset.
	// Under mu.
	retell map[session.Partition]bool
	// handedAt: the member epoch (classic: generation) at which each
	// partition of the client's assignment was handed to it. A commit of
	// the partition under an earlier one is from before it was handed
	// (its position from an earlier holding: a retold partition's) and is
	// refused as stale. Under mu.
	handedAt map[session.Partition]int32
	// commitsSent: the last offsets (at most commitsSentMax) the member
	// sent the coordinator in commits of each partition: where a
	// carry-over's regrant may start (refenceMark.carries). Under mu.
	commitsSent map[session.Partition][]int64
	log         *zap.Logger

	// join is the member's join as of its current subscription (under
	// mu): the body of the driver's every join (a rejoin as a new member
	// subscribes to what the client subscribes to now).
	join api.JoinRequest
	// wanted: a KIP-848 member's subscription as the client sent it, when
	// missing (some of its topics) are not in Kafka and not in join yet
	// (missingtopics.go); nil otherwise. Under mu.
	wanted, missing []string
	// regex: a KIP-848 member's SubscribedTopicRegex the listener matched
	// itself (regexsub.go), join.Topics what it matched; nil otherwise.
	// Under mu.
	regex *regexSub

	ctx    context.Context // ends when the member is gone
	cancel context.CancelFunc
	joined chan driver.JoinResult

	mu       sync.Mutex
	d        *driver.Driver
	sess     *session.Session // d's, read-only
	state    memberState
	calls    map[uint64]context.CancelFunc // member requests in flight
	slots    map[session.Partition]uint64  // open progress slot: the fetch's call
	deferred map[session.Partition]deferredRevoke
	tickets  map[uint64]chan api.Code
	ticket   uint64
	meta     map[session.Partition]commitMeta // the client's last commit metadata per partition
	sent     []session.Partition              // the assignment last handed to the client
	epoch    int32                            // KIP-848 member epoch, or classic generation
	prev     int32                            // the epoch before the last bump (a lost answer)
	syncing  bool                             // classic: joined, SyncGroup not yet answered
	lastSeen time.Time
	joinedAt time.Time
	timer    *time.Timer
}

// driverConfig is the SDK driver's configuration for a member. Nothing is
// ever buffered (progress carries no bytes) and every delivery is
// processed at once, so the buffer and revoke timeout only need to be
// valid; fetch waits do not apply (progress slots wait for the client).
// With several coordinator URLs (replicas) a heartbeat or commit attempt
// a frozen replica holds is given up past the driver's margin and the
// next replica asked, as the SDK's members do (Replicas): the margin
// counts the heartbeat_wait the coordinator answered the join with, not
// heartbeatWaitMax.
func (s *Server) driverConfig(join api.JoinRequest) driver.Config {
	return driver.Config{
		Join: join, Gateways: 1, HeartbeatWait: heartbeatWaitMax, FetchMaxWait: s.cfg.MaxWait,
		Replicas:       len(coordinators.Split(s.cfg.CoordinatorURL)) > 1,
		RequestTimeout: s.cfg.RequestTimeout, RetryBackoff: 50 * time.Millisecond, RetryBackoffMax: time.Second,
		Session: session.Config{BufferMaxBytes: 1, PollMaxRecords: 1 << 30, RevokeTimeout: time.Second},
		Rand:    rand.Int64N,
	}
}

// heartbeatWaitMax caps a held heartbeat (the coordinator's
// heartbeat_wait caps it further).
const heartbeatWaitMax = 10 * time.Second

// start joins the coordinator for the member (the driver's first join,
// retried with backoff for up to request_timeout) and, once joined,
// keeps it alive. It always returns: the join's outcome comes from the
// driver (joined, refused, request_timeout passed, or cancelled when ctx
// ends — a gateway closing, the client's connection gone) or, should the
// member end first, from finishLocked (errMemberEnded). Nothing but that
// outcome is waited for, so no timer guards the wait.
func (m *member) start(ctx context.Context, join api.JoinRequest) error {
	// Not the server's context: a closing gateway still lets its members
	// release their partitions and leave (closeAll waits for it).
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.d = m.g.s.newDriver(join)
	m.sess = m.d.Session()
	m.joined = make(chan driver.JoinResult, 1)
	m.calls = map[uint64]context.CancelFunc{}
	m.slots = map[session.Partition]uint64{}
	m.deferred = map[session.Partition]deferredRevoke{}
	m.tickets = map[uint64]chan api.Code{}
	m.meta = map[session.Partition]commitMeta{}
	m.timer = time.AfterFunc(time.Hour, m.tick)
	m.mu.Lock()
	m.state = memberJoining
	m.join = join
	m.carry(m.d.Start(time.Now()))
	m.mu.Unlock()
	var r driver.JoinResult
	select {
	case r = <-m.joined:
	case <-ctx.Done():
		m.mu.Lock()
		m.carry(m.d.CancelJoin(time.Now(), ctx.Err()))
		m.finishLocked() // a no-op once the cancelled join ended the member
		m.mu.Unlock()
		r = <-m.joined
	}
	return r.Err
}

// joinEnded hands start the first join's outcome, once: a joined member
// is active (its liveness counts from now, when its client is
// answered); any other outcome ends it. Under mu.
func (m *member) joinEnded(r driver.JoinResult) {
	if m.state != memberJoining {
		return // ended already: finishLocked answered start
	}
	m.joined <- r
	m.state = memberActive
	m.lastSeen = time.Now()
	m.joinedAt = m.lastSeen
	if r.Err != nil {
		m.finishLocked()
		return
	}
	m.warnNoTopicMatches(m.join.TopicPattern, r.Response.TopicPatternMatches)
}

func (s *Server) newDriver(join api.JoinRequest) *driver.Driver {
	return driver.New(s.driverConfig(join))
}

// carry carries out the driver's commands without blocking. Under mu.
func (m *member) carry(cmds []driver.Command) {
	for _, cmd := range cmds {
		switch cmd := cmd.(type) {
		case driver.Send:
			m.send(cmd)
		case driver.Cancel:
			if cancel := m.calls[cmd.Call]; cancel != nil {
				cancel()
			}
			for p, call := range m.slots {
				if call == cmd.Call {
					delete(m.slots, p)
				}
			}
		case driver.JoinResult:
			m.joinEnded(cmd)
		case driver.LeaveResult:
			m.log.Debug("kafka member left", zap.Error(cmd.Err))
		case driver.Failed:
			m.log.Info("kafka member failed: its rejoin was refused", zap.Error(cmd.Err))
			m.finishLocked()
		case session.CommitResult:
			if ch := m.tickets[cmd.Ticket]; ch != nil {
				delete(m.tickets, cmd.Ticket)
				ch <- cmd.Code
			}
		case session.CallRevoke:
			if !cmd.Lost {
				// Revokes are stepped once the client gave the partitions up.
				m.carry(m.d.User(session.HookDone{Now: time.Now(), ID: cmd.ID}))
			}
		case session.CallGrant:
			m.log.Debug("kafka member granted", zap.Stringers("partitions", cmd.Partitions))
			m.regranted(cmd.Partitions)
		case session.Stop:
			m.finishLocked()
		}
	}
	m.renewSettled()
	m.rearm(time.Now())
}

// renewSettled ends the renewal of each partition the new member was
// granted: at the offset the renewal released it at (nobody committed
// it meanwhile), the client's own position goes on, unannounced, once
// its progress slot is open (the client's commit can be taken); at
// another offset (another member held it meanwhile and committed) the
// client must read on from that offset: it is told to give the
// partition up and then gets it again (retell). It wakes the commits
// waiting for a renewal. Under mu.
func (m *member) renewSettled() {
	for p, released := range m.renewing {
		info, ok := m.sess.Inspect(p)
		switch {
		case !ok || info.State != session.Fetching:
		case info.Processed != released:
			delete(m.renewing, p)
			m.tellAgain(p)
		case m.slots[p] != 0:
			delete(m.renewing, p)
		}
	}
	if len(m.renewing) == 0 {
		m.renewing = nil
	}
	m.wake()
}

// wake wakes the commits waiting for a renewal or a carry-over's regrant
// (awaitRegrant): whatever they wait for may have come. Under mu.
func (m *member) wake() {
	if m.renewWake != nil {
		close(m.renewWake)
		m.renewWake = nil
	}
}

// send carries out one request attempt: a fetch opens a progress slot;
// the member requests go to the coordinator in a goroutine.
func (m *member) send(s driver.Send) {
	if s.Kind == driver.KindFetch {
		m.slots[s.Fetch.Partition] = s.Call
		return
	}
	switch s.Kind {
	case driver.KindCommit:
		s.Commit = m.withMetadata(s.Commit)
		m.sentCommits(s.Commit)
	case driver.KindJoin:
		join := m.join
		s.Join = &join
	case driver.KindHeartbeat:
		if m.carrying {
			m.holdBeat(s)
			return
		}
	}
	ctx, cancel := context.WithTimeout(m.ctx, s.Timeout)
	m.calls[s.Call] = cancel
	credential := m.credential // the client's latest (carryOver)
	if s.Kind == driver.KindHeartbeat {
		m.heartbeats++
	}
	heartbeat := m.heartbeats
	m.g.s.wg.Add(1)
	go func() {
		defer m.g.s.wg.Done()
		a := m.g.api.Attempt(ctx, m.group, credential, s)
		clientPolicyApplies(&a)
		cancel()
		m.mu.Lock()
		defer m.mu.Unlock()
		delete(m.calls, s.Call)
		if s.Kind == driver.KindHeartbeat && a.Failure == nil {
			a.News.Revoke = m.holdRevokes(a.News.Revoke, a.Now)
			m.refenced(heartbeat)
		}
		m.carry(m.d.Answer(a))
	}()
}

// tick runs at the earliest deadline: the driver's (retries, timeouts),
// the client's liveness, a held revoke's rebalance timeout.
func (m *member) tick() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state == memberGone {
		return
	}
	now := time.Now()
	if m.state == memberActive && now.Sub(m.lastSeen) >= m.sessionTimeout {
		m.log.Info("kafka member silent past its session timeout: releasing its partitions and leaving",
			zap.Duration("session_timeout", m.sessionTimeout))
		m.closeLocked(now)
	}
	var late []api.PartitionRef
	for p, d := range m.deferred {
		switch {
		case now.Sub(d.at) < m.rebalanceTimeout:
		case d.refence: // no regrant came: an ordinary revoke from now on
			m.deferred[p] = deferredRevoke{ref: d.ref, at: now}
		default:
			late = append(late, d.ref)
			delete(m.deferred, p)
		}
	}
	m.revokeNow(late, now)
	if m.renewing != nil && !now.Before(m.renewUntil) {
		m.renewing = nil // the client is told (target) as of any change
	}
	m.carry(m.d.Tick(now))
}

// rearm points the timer at the next deadline. Under mu.
func (m *member) rearm(now time.Time) {
	if m.timer == nil || m.state == memberGone {
		return
	}
	next := m.d.NextDeadline()
	earlier := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	if m.state == memberActive {
		earlier(m.lastSeen.Add(m.sessionTimeout))
	}
	for _, d := range m.deferred {
		earlier(d.at.Add(m.rebalanceTimeout))
	}
	if m.renewing != nil {
		earlier(m.renewUntil)
	}
	if next.IsZero() {
		next = now.Add(time.Hour)
	}
	m.timer.Reset(max(next.Sub(now), time.Millisecond))
}

// finishLocked ends the member: it answers UNKNOWN_MEMBER_ID from now on,
// a first join still under way ends (errMemberEnded: the driver stops
// without reporting it), pending commits fail, requests in flight are
// cancelled and it leaves the registry. Under mu.
func (m *member) finishLocked() {
	if m.state == memberGone {
		return
	}
	if m.state == memberJoining {
		m.joined <- driver.JoinResult{Err: errMemberEnded}
	}
	m.state = memberGone
	m.renewing = nil
	m.wake()
	for t, ch := range m.tickets {
		delete(m.tickets, t)
		ch <- api.CodeUnknownMember
	}
	for _, cancel := range m.calls {
		cancel()
	}
	m.cancel()
	m.timer.Stop()
	go m.g.remove(m)
}

// holdRevokes keeps the revokes of partitions the client still owns in
// its last assignment for later (see acked) and returns the others, to be
// stepped now. A revoke of a partition being renewed (renewing) is
// stepped at once: the renewal released it already, and its release made
// the coordinator move it (giveUp), which queues that revoke to the
// releasing member itself; the partition stays the client's until the
// renewal settles (renewSettled, or renewUntil). Held, it took the
// partition out of target while the renewal ran: a client heartbeat in
// that window was told to rebalance (KafkaJS: 3 in 40 renewals). Under
// mu.
func (m *member) holdRevokes(refs []api.PartitionRef, now time.Time) []api.PartitionRef {
	var stepNow []api.PartitionRef
	for _, ref := range refs {
		p := session.Partition{Topic: ref.Topic, Partition: ref.Partition}
		if m.state == memberActive && slices.Contains(m.sent, p) && !m.isRenewing(p) {
			if d, held := m.deferred[p]; held && d.ref == ref {
				continue // told again (a resync after a lost answer): its clock runs from the first telling
			}
			mark, refence := m.refencing[p]
			delete(m.refencing, p)
			m.deferred[p] = deferredRevoke{ref: ref, at: now, refence: refence && ref.Epoch >= mark.epoch, mark: mark}
			continue
		}
		stepNow = append(stepNow, ref)
	}
	return stepNow
}

// refenced ends the carry-over's refencing once heartbeat number
// heartbeat, sent after the rejoin was answered, is answered: the rejoin's
// revokes went to the heartbeat held when it arrived or to a later one,
// so they were all in this answer (stepped by holdRevokes before) or an
// earlier one — or come back in a resync of this one after a lost answer.
// A revoke from now on is an ordinary one. Under mu.
func (m *member) refenced(heartbeat uint64) {
	if m.refenceEnds != 0 && heartbeat >= m.refenceEnds {
		m.refencing, m.refenceEnds = nil, 0
	}
}

// regranted takes the partitions the session was just granted under a
// new epoch. Their held revokes are moot (the session ignores a revoke of
// an older epoch). One the client holds (it was handed an earlier epoch's)
// stays its own, unannounced, only when this is a carry-over's regrant
// from an offset the client's position continues (refenceMark.carries);
// any other regrant under the client — an administrator's offsets reset,
// which fences the holder and grants the partition back from the reset
// offset at once — is told again (retell): else the client would read on
// from its own position and its next commit, taken with the new
// capability, would undo the reset. A renewal's regrants are
// renewSettled's. A grant does not end the partition's refencing: it may
// be a grant sent before the rejoin arrived, whose fence is still to come
// (refenced ends it). Under mu.
func (m *member) regranted(ps []session.Partition) {
	for _, p := range ps {
		info, ok := m.sess.Inspect(p)
		if !ok || info.State != session.Fetching {
			continue
		}
		d, held := m.deferred[p]
		if held && info.Epoch > d.ref.Epoch {
			delete(m.deferred, p)
		}
		// The client holds p from an earlier epoch while p is in its
		// assignment, or its revoke is held: it was told to give p up
		// and has not yet (the reset's revoke may come a heartbeat before
		// its regrant, and the client be handed the new assignment in
		// between).
		if !slices.Contains(m.sent, p) && !held {
			if m.syncing {
				// A classic client between its JoinGroup and SyncGroup
				// gave p up (joinClassic): its SyncGroup hands p under
				// this generation, and a commit of p under the one
				// before (its position before this regrant, racing its
				// rejoin) is stale.
				m.handAt(p, m.epoch)
			}
			continue // not the client's (yet)
		}
		if m.isRenewing(p) || m.retell[p] {
			continue // renewSettled's, or told again already
		}
		mark, marked := m.refencing[p]
		if held && d.refence {
			mark, marked = d.mark, true
		}
		if marked && mark.carries(info.Processed, m.commitsSent[p]) {
			continue
		}
		m.log.Info("kafka member's partition granted again under its client (an administrator's offsets reset, or it moved to another member and back): telling the client to give it up and take it again",
			zap.Stringer("partition", p), zap.Uint64("epoch", info.Epoch), zap.Int64("offset", info.Processed))
		m.tellAgain(p)
	}
}

// sentCommits records the offsets of a commit sent to the coordinator
// (commitsSent). Under mu.
func (m *member) sentCommits(req *api.CommitRequest) {
	if req == nil {
		return
	}
	if m.commitsSent == nil {
		m.commitsSent = map[session.Partition][]int64{}
	}
	for _, o := range req.Offsets {
		p := session.Partition{Topic: o.Topic, Partition: o.Partition}
		sent := m.commitsSent[p]
		if len(sent) == commitsSentMax {
			sent = slices.Delete(sent, 0, 1)
		}
		m.commitsSent[p] = append(sent, o.Offset)
	}
}

// tellAgain keeps p out of the client's assignment until it gave p up
// (retell). Under mu.
func (m *member) tellAgain(p session.Partition) {
	if m.retell == nil {
		m.retell = map[session.Partition]bool{}
	}
	m.retell[p] = true
}

// hand records t as the assignment handed to the client under the
// member's current epoch (handedAt: from when its commits of each
// partition count). Under mu.
func (m *member) hand(t []session.Partition) {
	for p := range m.handedAt {
		if !slices.Contains(t, p) {
			delete(m.handedAt, p)
		}
	}
	for _, p := range t {
		if _, ok := m.handedAt[p]; !ok {
			m.handAt(p, m.epoch)
		}
	}
	m.sent = t
}

// handAt records p as handed to the client at epoch. Under mu.
func (m *member) handAt(p session.Partition, epoch int32) {
	if m.handedAt == nil {
		m.handedAt = map[session.Partition]int32{}
	}
	m.handedAt[p] = epoch
}

// acked steps the held revokes of the partitions the client no longer
// owns. owned nil means unknown (a KIP-848 keepalive). Under mu.
func (m *member) acked(owned map[session.Partition]bool, now time.Time) {
	if owned == nil {
		return
	}
	for p := range m.retell {
		if !owned[p] {
			delete(m.retell, p)
			delete(m.handedAt, p) // handed anew from here: its commits count from that epoch on
		}
	}
	var refs []api.PartitionRef
	for p, d := range m.deferred {
		if !owned[p] && !d.refence {
			refs = append(refs, d.ref)
			delete(m.deferred, p)
		}
	}
	m.revokeNow(refs, now)
}

func (m *member) revokeNow(refs []api.PartitionRef, now time.Time) {
	if len(refs) == 0 {
		return
	}
	slices.SortFunc(refs, func(a, b api.PartitionRef) int {
		return compareParts(session.Partition{Topic: a.Topic, Partition: a.Partition}, session.Partition{Topic: b.Topic, Partition: b.Partition})
	})
	m.carry(m.d.User(session.NewsArrived{Now: now, Incarnation: m.sess.Member().Incarnation, News: api.HeartbeatResponse{Revoke: refs}}))
}

// closeLocked revokes and releases everything (at the client's last
// committed offsets) and leaves. Under mu.
func (m *member) closeLocked(now time.Time) {
	if m.state != memberActive {
		return
	}
	m.state = memberClosing
	clear(m.deferred)
	m.carry(m.d.User(session.CloseRequested{Now: now}))
}

// seen records contact from the client. Under mu.
func (m *member) seen(now time.Time) {
	m.lastSeen = now
}

// target is what the client should own now: the partitions the session
// fetches, minus those whose revoke is held back. Under mu.
func (m *member) target() []session.Partition {
	out := m.sess.Assigned()
	if len(m.renewing) > 0 {
		for p := range m.renewing {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
		slices.SortFunc(out, compareParts)
	}
	if len(m.deferred) == 0 && len(m.retell) == 0 {
		return out
	}
	return slices.DeleteFunc(out, func(p session.Partition) bool {
		d, held := m.deferred[p]
		return held && !d.refence || m.retell[p]
	})
}

// capability returns the capability of p if the member fetches it, and
// whether the client's fetches of p pause: without a capability, when
// the member is renewing p for its client or retelling it (the client's
// position is from before a regrant and is not read on from); with one,
// when it is refused as revoked while its carry-over's fence is pending
// (refencePending: the regrant is on its way).
func (m *member) capability(p session.Partition) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state == memberGone {
		return "", false
	}
	if m.isRenewing(p) || m.retell[p] {
		return "", true // a capability of the new member waits for its slot; or the client's position is stale
	}
	info, ok := m.sess.Inspect(p)
	if !ok || info.State != session.Fetching {
		return "", false
	}
	return info.Capability, m.fencePending(p, info.Epoch)
}

// commit records the client's committed offsets as the session's
// progress and commits them through the coordinator; it returns a code
// per partition ("" committed) and, for each partition refused
// offset_regression here, the committed offset it is below (for the
// log: commitpolicy.go).
// commitMeta is the metadata a Kafka client committed with an offset.
type commitMeta struct {
	offset int64
	text   string
}

// withMetadata is a copy of the driver's commit in which each offset the
// client committed carries the client's metadata (the driver's requests
// carry progress only). A commit of another offset (a release at a
// later position) carries none.
func (m *member) withMetadata(req *api.CommitRequest) *api.CommitRequest {
	if req == nil || len(m.meta) == 0 {
		return req
	}
	out := *req
	out.Offsets = slices.Clone(req.Offsets)
	for i, o := range out.Offsets {
		if cm, ok := m.meta[session.Partition{Topic: o.Topic, Partition: o.Partition}]; ok && cm.offset == o.Offset {
			out.Offsets[i].Metadata = cm.text
		}
	}
	return &out
}

// metadata is what this member's client committed with offset on p
// (false: it committed nothing at that offset).
func (m *member) metadata(p session.Partition, offset int64) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cm, ok := m.meta[p]
	return cm.text, ok && cm.offset == offset
}

func (m *member) commit(ctx context.Context, generation int32, offsets map[session.Partition]int64, meta map[session.Partition]string) (map[session.Partition]api.Code, map[session.Partition]int64) {
	codes := make(map[session.Partition]api.Code, len(offsets))
	var below map[session.Partition]int64
	m.mu.Lock()
	m.awaitRegrant(ctx, offsets)
	now := time.Now()
	if m.state != memberActive {
		m.mu.Unlock()
		for p := range offsets {
			codes[p] = api.CodeUnknownMember
		}
		return codes, nil
	}
	m.seen(now)
	for p, offset := range offsets {
		info, ok := m.sess.Inspect(p)
		slot := m.slots[p]
		switch {
		case m.isRenewing(p):
			codes[p] = api.CodeUnavailable // still being renewed: retriable
		case m.retell[p]:
			codes[p] = api.CodeStaleEpoch // from a position the client must give up (retell)
		case generation < m.handedAt[p]:
			codes[p] = api.CodeStaleEpoch // from before it was handed to the client: an earlier holding's position
		case !ok || info.State != session.Fetching:
			codes[p] = api.CodeStaleEpoch // not ours (any more)
		case offset < info.Processed:
			codes[p] = api.CodeOffsetRegression
			if below == nil {
				below = map[session.Partition]int64{}
			}
			below[p] = info.Processed
		case offset == info.Processed:
			m.meta[p] = commitMeta{offset: offset, text: meta[p]}
		case slot == 0:
			codes[p] = api.CodeTokenExpired // its capability is expiring, awaiting renewal
		default:
			m.meta[p] = commitMeta{offset: offset, text: meta[p]}
			delete(m.slots, p)
			m.carry(m.d.Answer(driver.Answered{Now: now, Call: slot, Fetched: driver.Fetched{Records: 1, Next: offset}}))
		}
	}
	m.carry(m.d.User(session.Polled{Now: now}))
	m.ticket++
	ch := make(chan api.Code, 1)
	m.tickets[m.ticket] = ch
	m.carry(m.d.User(session.CommitRequested{Now: now, Ticket: m.ticket}))
	m.mu.Unlock()
	var code api.Code
	select {
	case code = <-ch:
	case <-ctx.Done():
		code = api.CodeUnavailable
	}
	for p := range offsets {
		if _, set := codes[p]; !set {
			codes[p] = code
		}
	}
	return codes, below
}

// active reports whether the Kafka member is alive on this gateway (not
// leaving, not gone), whatever its capgate member is doing.
func (m *member) active() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.state == memberActive
}

func (m *member) isRenewing(p session.Partition) bool {
	_, ok := m.renewing[p]
	return ok
}

// refencePending reports whether p is held under the epoch a
// carry-over's rejoin fences, its regrant not yet come: the rejoin is in
// flight or was accepted (the fence is on its way to the gateways or
// there) and p is marked at its current epoch, or the fence's revoke is
// held as the carry-over's (deferredRevoke.refence) at its current epoch
// or above. Its capability is then refused (capability_revoked) or about
// to be, for a few round trips: the client's fetches refused so are
// answered empty, throttled (capability), and its commits wait for the
// regrant (awaitRegrant). Nothing pauses on a mark alone — the marks
// outlive the regrant — only on the epoch the regrant replaces. Under mu.
func (m *member) refencePending(p session.Partition) bool {
	info, ok := m.sess.Inspect(p)
	return ok && info.State == session.Fetching && m.fencePending(p, info.Epoch)
}

// fencePending is refencePending of p fetched at epoch. Under mu.
func (m *member) fencePending(p session.Partition, epoch uint64) bool {
	if d, held := m.deferred[p]; held && d.refence {
		return epoch <= d.ref.Epoch
	}
	mark, marked := m.refencing[p]
	return marked && epoch <= mark.epoch && (m.carrying || m.refenceEnds != 0)
}

// awaitRegrant waits, while a commit names a partition being renewed
// (renewing) or whose carry-over fence is pending (refencePending), until
// the renewal settled (the new member fetches it) or the regrant came:
// the client's offset is then committed with the new capability instead
// of being refused with the fenced one — which a classic client answers
// by rejoining and reading again from its committed offset. The wait is
// bounded by ctx and by half the client's session timeout (the
// connection reads nothing else meanwhile, its heartbeats included);
// then the commit goes with what the member holds. Called and returns
// under mu.
func (m *member) awaitRegrant(ctx context.Context, offsets map[session.Partition]int64) {
	renewing := func() bool {
		for p := range offsets {
			if m.isRenewing(p) || m.refencePending(p) {
				return true
			}
		}
		return false
	}
	if !renewing() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, m.sessionTimeout/2)
	defer cancel()
	for m.state == memberActive && renewing() && ctx.Err() == nil {
		if m.renewWake == nil {
			m.renewWake = make(chan struct{})
		}
		wake := m.renewWake
		m.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
		}
		m.mu.Lock()
	}
}

// committed is the member's committed offset of p (-1 when not held or
// unknown).
func (m *member) committed(p session.Partition) (int64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	info, ok := m.sess.Inspect(p)
	if !ok || info.State != session.Fetching {
		return -1, false
	}
	return max(info.Committed, -1), true
}

// token is the member's capgate member token.
func (m *member) token() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sess.Member().Token
}

func compareParts(a, b session.Partition) int {
	if a.Topic != b.Topic {
		if a.Topic < b.Topic {
			return -1
		}
		return 1
	}
	return int(a.Partition) - int(b.Partition)
}

// subscribed reports whether topics (or pattern, when not empty) is the
// member's current subscription. Under no lock.
func (m *member) subscribed(topics []string, pattern string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.regex != nil {
		return pattern == m.regex.text // join.Topics are what it matched
	}
	if pattern != "" || m.join.TopicPattern != "" {
		return pattern == m.join.TopicPattern
	}
	joined := m.join.Topics
	if m.wanted != nil {
		joined = m.wanted // the missing topics are subscribed to, not joined
	}
	a, b := slices.Clone(topics), slices.Clone(joined)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

// resubscribe changes the member's subscription at the coordinator: a
// rejoin of its capgate member (its id, the client's credential) with the
// new topics or pattern, as the SDK's own rejoin. The coordinator
// reassigns the group; a rejoin also fences the partitions the member
// holds and grants them back under fresh epochs, so each partition it
// keeps comes back to it like a moved one (the client is told to give it
// up, commits, and gets it again). The partitions granted at once come
// in the answer and are stepped like heartbeat news; the others come in
// the driver's heartbeats. The session keeps its incarnation and member
// id and takes the answer's member token (session.MemberRenewed). ""
// when changed; a refusal leaves the subscription as it was.
func (m *member) resubscribe(ctx context.Context, topics []string, pattern string) api.Code {
	m.mu.Lock()
	if m.state != memberActive {
		m.mu.Unlock()
		return api.CodeUnknownMember
	}
	join := m.join
	join.Topics, join.TopicPattern = topics, pattern
	if pattern != "" {
		join.Topics = nil
	}
	credential := m.credential
	added := m.startRefence() // the rejoin fences what it keeps: its regrants are the member's own
	m.mu.Unlock()
	a := m.rejoinSelf(ctx, join, credential)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.refenceAnswered(a.Failure == nil, added)
	m.wake()
	if f := a.Failure; f != nil {
		m.log.Info("kafka member's subscription change refused", zap.Strings("topics", shownTopics(topics)), zap.Int("topics_named", len(topics)),
			zap.String("pattern", pattern), zap.Error(f.Err))
		if f.Code == "" {
			return api.CodeUnavailable
		}
		return f.Code
	}
	m.join = join
	m.log.Info("kafka member's subscription changed", zap.Strings("topics", shownTopics(topics)), zap.Int("topics_named", len(topics)), zap.String("pattern", pattern),
		zap.Int("grants", len(a.Join.Grants)))
	m.warnNoTopicMatches(pattern, a.Join.TopicPatternMatches)
	if m.state == memberActive {
		m.carry(m.d.Renewed(a.Now, a.Join))
	}
	return ""
}

// rejoinSelf rejoins the member's capgate member by its id with join's
// subscription and credential as bearer, within request_timeout. Under
// no lock.
func (m *member) rejoinSelf(ctx context.Context, join api.JoinRequest, credential string) driver.Answered {
	return m.rejoinWithin(ctx, join, credential, m.g.s.cfg.RequestTimeout)
}

// rejoinWithin is rejoinSelf within timeout.
func (m *member) rejoinWithin(ctx context.Context, join api.JoinRequest, credential string, timeout time.Duration) driver.Answered {
	m.mu.Lock()
	join.MemberID = m.sess.Member().ID
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	a := m.g.api.Attempt(ctx, m.group, credential, driver.Send{Kind: driver.KindJoin, Join: &join, Timeout: timeout})
	clientPolicyApplies(&a)
	return a
}

// carryRejoin is a carry-over's rejoin (rejoinSelf), tried again while
// it fails retriably — no answer, unavailable, rate_limited: a replica
// killed or frozen, a takeover under way — until request_timeout has
// passed since the first attempt, as the SDK's driver retries its own
// carry-over. The first attempt is given margin (the driver's join
// margin: a frozen replica, its socket open, holds it no longer than
// that, and the transport moves on to the next replica), the next ones
// what is left. Given up at the first failure, a renewal cut by a
// takeover left the member on its old member token, which expires with
// the old credential: the member ended, every partition was revoked from
// the client, and what it had read since its last commit was read again
// (a kgo client renewing its token as the leading replica was killed:
// TestCarryOverIsRetriedPastATakeover). A repeat of a rejoin that landed
// renews the same member again (renew_token is checked as the member's
// token, not as its latest). It stops when the member is no longer
// active. Under no lock.
func (m *member) carryRejoin(ctx context.Context, join api.JoinRequest, credential string, margin time.Duration) driver.Answered {
	timeout := m.g.s.cfg.RequestTimeout
	deadline := time.Now().Add(timeout)
	for round := 0; ; round++ {
		a := m.rejoinWithin(ctx, join, credential, min(timeout, margin))
		margin = timeout // only the first attempt gets the margin
		f := a.Failure
		if f == nil || !f.Retriable() {
			return a
		}
		wait := driver.Backoff(round, 50*time.Millisecond, time.Second, f.RetryAfter, rand.Int64N)
		if timeout = time.Until(deadline) - wait; timeout <= 0 {
			return a
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return a
		}
		m.mu.Lock()
		active := m.state == memberActive
		m.mu.Unlock()
		if !active {
			return a
		}
	}
}

// carryOver moves the member onto the client's renewed credential (a
// KIP-368 re-authentication with a token of the same identity). The
// member token never outlives the credential the member joined with, so
// without this the member would end when the first credential expires.
// From now on the driver's joins present the new credential, and the
// capgate member is renewed in place with it: a rejoin by its id with its
// member token as renew_token, which the coordinator answers with a
// member token expiring with the new credential and the capabilities
// the member holds renewed under their epochs — no fence, so the client's
// fetches and commits go on untouched. A coordinator from before
// renew_token refuses the field (400): then the plain rejoin, which
// fences and grants back what the member holds under fresh epochs — the
// client keeps its assignment and its fetch positions (nothing read
// twice; the fence window's fetches answered empty and its commits held:
// refencing). A member bound to the old credential's id (a capgate client
// credential: its jti, unless another /oauth/token credential of the same
// OAuth client; an IdP identity keeps its id) is refused
// (unknown_member): then the member is renewed — every
// partition released at the client's committed offsets, a leave, and a
// join with the new credential as a new capgate member behind the same
// Kafka member (session.RenewRequested) — without telling the client
// (renewing: what comes back at the offsets released stays its own).
// With an admin-minted credential renewed by another (proof: the
// connection's previous one, Principal.renewalProof) the rejoin carries
// proof as renew_credential, and a coordinator that takes it renews the
// member in place and rebinds it to the new credential — no release, no
// leave: in a group of several members the renewal anew handed the
// member's partitions to the others and back, a rebalance of the group
// at every renewal (TestKafkaJSGroupRenewedManyTimes).
// Other refusals leave the member
// as it is; it ends when its member token expires. A credential expiring
// no later than a second after the member token only becomes the one
// later joins present: a client re-authenticates each of its connections,
// and one carry-over per renewal is enough (each fences the member's
// partitions).
func (m *member) carryOver(ctx context.Context, credential, proof string, expires time.Time) {
	m.mu.Lock()
	if m.state != memberActive || credential == m.credential {
		m.mu.Unlock()
		return
	}
	m.credential = credential
	join := m.join
	current, known := driver.TokenExpiry(m.sess.Member().Token)
	if m.carrying || (known && !expires.After(current.Add(time.Second))) {
		m.mu.Unlock()
		return
	}
	m.carrying = true
	renew := join
	renew.RenewToken, renew.RenewCredential = m.sess.Member().Token, proof
	margin := m.d.JoinMargin()
	m.mu.Unlock()
	a := m.carryRejoin(ctx, renew, credential, margin)
	var added []session.Partition
	fenced := false
	if f := a.Failure; f != nil && f.Code == api.CodeBadRequest {
		// A coordinator from before renew_token (its strict decoding
		// refuses the field): the plain rejoin, which fences.
		m.mu.Lock()
		active := m.state == memberActive
		if active {
			added, fenced = m.startRefence(), true
		}
		m.mu.Unlock()
		if active {
			a = m.rejoinSelf(ctx, join, credential)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.carrying = false
	defer m.wake() // commits waiting for the rejoin (refencePending)
	if m.state != memberActive {
		return
	}
	defer m.releaseBeat()
	if fenced {
		m.refenceAnswered(a.Failure == nil, added)
	}
	switch f := a.Failure; {
	case f == nil && proof != "" && !fenced:
		m.log.Info(renewedInPlaceLog)
		m.carry(m.d.Renewed(a.Now, a.Join))
	case f == nil:
		m.log.Debug("kafka member carried over to the renewed credential")
		m.carry(m.d.Renewed(a.Now, a.Join))
	case f.Code == api.CodeUnknownMember:
		m.log.Info("kafka member bound to its old credential: renewing it as a new capgate member")
		now := time.Now()
		m.renewing = map[session.Partition]int64{}
		for _, p := range m.target() {
			if info, ok := m.sess.Inspect(p); ok && info.State == session.Fetching {
				m.renewing[p] = info.Processed // the offset its release commits
			}
		}
		m.renewUntil = now.Add(m.rebalanceTimeout)
		clear(m.deferred)
		m.refencing, m.refenceEnds = nil, 0
		m.carry(m.d.User(session.RenewRequested{Now: now}))
	default:
		m.log.Info("kafka member not carried over to the renewed credential: it ends with its member token", zap.Error(f.Err))
	}
}

// renewedInPlaceLog is logged (info) when a member bound to an
// admin-minted credential was renewed in place with the next one
// (renew_credential), where it was renewed as a new capgate member
// before: one line a renewal, as that one.
const renewedInPlaceLog = "kafka member renewed in place with a new credential of the same name (its old one presented beside it)"

// holdBeat holds heartbeat s back while a carry-over's rejoin is in
// flight (heldBeat). A cancel of its call drops it. Under mu.
func (m *member) holdBeat(s driver.Send) {
	m.heldBeat, m.heldFor = &s, m.sess.Member().Incarnation
	m.calls[s.Call] = func() {
		if m.heldBeat != nil && m.heldBeat.Call == s.Call { // under mu: carry calls cancels so
			m.heldBeat = nil
			delete(m.calls, s.Call)
		}
	}
}

// releaseBeat sends the heartbeat held during the carry-over's rejoin,
// with the member token the rejoin answered when the member is the one
// it was sent for (else as it was: its answer is for that member). It
// runs after the driver stepped the rejoin's answer, so the heartbeat
// carries the carry-over's refence mark too (refenceAnswered). Under mu.
func (m *member) releaseBeat() {
	s := m.heldBeat
	if s == nil {
		return
	}
	m.heldBeat = nil
	delete(m.calls, s.Call)
	if member := m.sess.Member(); member.Incarnation == m.heldFor {
		s.Token = member.Token
	}
	m.send(*s)
}

// startRefence records, as a carry-over's rejoin is sent, the epoch of
// each partition the member holds (refencing), keeping an earlier
// carry-over's mark whose fence has not arrived (at that epoch or a lower
// one: epochs only rise). Until the rejoin is answered no heartbeat ends
// the marks: its revokes may come on any of them. It returns the
// partitions it marked. Under mu.
func (m *member) startRefence() []session.Partition {
	if m.refencing == nil {
		m.refencing = map[session.Partition]refenceMark{}
	}
	m.refenceEnds = 0
	var added []session.Partition
	for _, p := range m.sess.Assigned() {
		if _, marked := m.refencing[p]; marked {
			continue
		}
		if info, ok := m.sess.Inspect(p); ok {
			m.refencing[p] = refenceMark{epoch: info.Epoch, committed: info.Committed}
			added = append(added, p)
		}
	}
	return added
}

// refenceAnswered: the carry-over's rejoin was answered (fenced: the
// coordinator accepted it) or refused. A refused rejoin fenced nothing:
// its own marks go. What stays ends with the answer of the next heartbeat
// sent from now on (refenced). Under mu.
func (m *member) refenceAnswered(fenced bool, added []session.Partition) {
	if !fenced {
		for _, p := range added {
			delete(m.refencing, p)
		}
	}
	if len(m.refencing) == 0 {
		m.refencing, m.refenceEnds = nil, 0
		return
	}
	m.refenceEnds = m.heartbeats + 1
}
