package sim

import (
	"cmp"
	"slices"
	"time"

	"github.com/capgate/capgate/client/session"
	"github.com/capgate/capgate/coordinator/group"
	"github.com/capgate/capgate/gateway/authz"
)

// checker holds the world's own record of what every part promised and
// did, kept independently of the parts' state, and the seven safety
// checks. Each check runs after every event that changes its inputs (an
// admission, an acknowledgement, a grant, a persist, a delivery), which
// is the same as after every event, at a fraction of the cost; the first
// failure stops the run with the seed and event index.
type checker struct {
	w       *World
	parts   []*partCheck // by kafka partition index
	fences  []fenceTag   // every fence seen on the sync channel, by tag
	gws     []*gatewayCheck
	removed map[string]bool // member ids the coordinator removed
	// joinKeys: the member each join key (Idempotency-Key) was answered
	// last (checker 10).
	joinKeys map[string]string
}

// partCheck is the checker's record of one partition of the group.
type partCheck struct {
	id             session.Partition
	index          int
	inflight       []*fetchEntry // admitted fetches in flight, every gateway
	admittedEpoch  uint64        // highest epoch a fetch was admitted under
	admittedMember string
	grantEpoch     uint64 // highest epoch granted
	grantHolder    string
	ownedEpoch     uint64 // highest epoch seen owned (persisted or granted)
	lastMinted     uint64 // highest epoch a capability was minted for
	persistedEpoch uint64
	fenceEpoch     uint64 // highest fence published
	fenceTags      []fenceTag
	epochs         map[uint64]*epochCheck // every epoch a capability was minted for
	committed      int64                  // last committed offset persisted (-1: none)
	delivered      []bool                 // offsets delivered at least once
}

// epochCheck is one epoch of one partition: its holder and what happened
// under it.
type epochCheck struct {
	epoch         uint64
	holder        string
	prevMinted    uint64 // the epoch with a capability before this one
	minted        bool   // a capability was minted for this epoch
	grantOffset   int64  // where the holder starts
	maxExpiry     int64  // latest exp minted at this epoch (unix s)
	revoking      bool   // a revoke from this holder was persisted
	revokeStart   time.Duration
	released      bool  // the coordinator accepted its release
	releaseOffset int64 // the offset the release committed (-1: none)
	cleanRelease  bool  // ... which was exactly what the holder delivered
	// rejoined: a keyed join's repeat rejoined the holder (record.go's
	// rejoined) — the machine's release of the epoch, not the holder's:
	// the process may still hold the epoch (its answer came from another
	// attempt) and deliver what gateways answered before the fence.
	rejoined    bool
	ackedCommit int64 // highest offset it committed successfully (-1: none)
	next        int64 // delivered end: the offset after the last record delivered
}

// fenceTag is a fence seen on the sync channel: seq is the seq of the
// first reply that carried it, so every gateway acknowledging seq or more
// must have applied it.
type fenceTag struct {
	seq   uint64
	part  int
	epoch uint64
}

// gatewayCheck is the checker's record of one gateway id.
type gatewayCheck struct {
	maxAck   uint64         // highest after any incarnation sent
	replyInc int            // the incarnation the sync answers below went to
	replies  []replyMark    // answers sent to replyInc, in seq order
	inc      int            // incarnation the acknowledged fences belong to
	ackIndex int            // fences[:ackIndex] are folded into acked
	acked    []uint64       // per partition: highest fence acknowledged
	received map[int]uint64 // per partition: highest fence answered to it, any incarnation (replicas)
}

func newChecker(w *World) *checker {
	k := &checker{w: w, removed: map[string]bool{}}
	for range w.prof.gateways {
		k.gws = append(k.gws, &gatewayCheck{})
	}
	for _, id := range w.kafka.parts {
		k.addPartition(id)
	}
	return k
}

// addPartition starts the record of a new partition.
func (k *checker) addPartition(id session.Partition) {
	k.parts = append(k.parts, &partCheck{id: id, index: len(k.parts), epochs: map[uint64]*epochCheck{}, committed: -1})
	for _, gc := range k.gws {
		gc.acked = append(gc.acked, 0)
	}
}

func (k *checker) part(topic string, partition int32) *partCheck {
	return k.parts[k.w.kafka.index[partitionOf(topic, partition)]]
}

func partitionOf(topic string, partition int32) session.Partition {
	return session.Partition{Topic: topic, Partition: partition}
}

// ---- 1. exclusive reader -------------------------------------------------

// checkExclusiveReader: for each partition, no two different members
// have a fetch admitted at the same time. A fetch is admitted from its
// admission until its answer leaves the gateway or it is cancelled, and
// only while it could still serve data: its gateway is alive and in sync
// (a gateway past sync_timeout refuses it at the end), and Decide still
// allows it. It runs at every admission and whenever a gateway resyncs
// (the only moments a fetch can become able to serve).
func (k *checker) checkExclusiveReader(e *fetchEntry) {
	if !servable(e) {
		return
	}
	for _, o := range k.parts[e.part].inflight {
		if o != e && o.member != e.member && servable(o) {
			k.w.fail("exclusive reader", "%s: %q admitted at %s epoch %d (admitted %s) while %q at %s epoch %d (admitted %s) may still read",
				k.parts[e.part].id, e.member, e.gw.id, e.claims.Epoch, e.admitted, o.member, o.gw.id, o.claims.Epoch, o.admitted)
			return
		}
	}
}

// checkAdmissionOrder: readers follow each other: once a fetch under
// epoch e was admitted, no other member's fetch under an epoch below e is
// admitted anywhere (even one that would not overlap in time).
func (k *checker) checkAdmissionOrder(e *fetchEntry) {
	p := k.parts[e.part]
	epoch := e.claims.Epoch
	if epoch < p.admittedEpoch && e.member != p.admittedMember {
		k.w.fail("exclusive reader", "%s: %q admitted at %s epoch %d after %q was admitted at epoch %d",
			p.id, e.member, e.gw.id, epoch, p.admittedMember, p.admittedEpoch)
		return
	}
	if epoch > p.admittedEpoch {
		p.admittedEpoch, p.admittedMember = epoch, e.member
	}
}

// servable reports whether an admitted fetch could still answer with data.
func servable(e *fetchEntry) bool {
	g := e.gw
	return !e.done && g.up && g.inc == e.inc && g.syncRefusal() == "" &&
		authz.Decide(e.claims, e.req, g.view, g.localWall()) == authz.Allow
}

// ---- 2. epochs only rise -------------------------------------------------

// checkEpochsRise: per partition the epochs the coordinator grants only
// rise, across crashes and restarts; an epoch is granted to one holder
// (re-sends and renewals carry the same epoch to the same holder).
func (k *checker) checkEpochsRise(p *partCheck, epoch uint64, holder string) {
	switch {
	case epoch < p.grantEpoch:
		k.w.fail("epochs only rise", "%s: epoch %d granted to %q after epoch %d to %q", p.id, epoch, holder, p.grantEpoch, p.grantHolder)
	case epoch == p.grantEpoch && holder != p.grantHolder:
		k.w.fail("epochs only rise", "%s: epoch %d granted to %q and to %q", p.id, epoch, p.grantHolder, holder)
	}
}

// checkPersistedEpoch: the epoch the coordinator persists for a
// partition never falls.
func (k *checker) checkPersistedEpoch(p *partCheck, epoch uint64) {
	if epoch < p.persistedEpoch {
		k.w.fail("epochs only rise", "%s: persisted epoch fell from %d to %d", p.id, p.persistedEpoch, epoch)
	}
}

// checkFencesRise: a reset snapshot on the sync channel (which replaces
// a gateway's view) never carries a fence below one published before,
// after a restart included: a lower fence would let a revoked epoch back
// in. (Deltas cannot lower a view; they may repeat old entries.)
//
// With replicas the rule is per gateway: a reset never carries a fence
// below one that gateway was answered before. A leader deposed while it
// had nothing to write learns it only at its next write; answered from
// its memory meanwhile, a reset would be the log as it read it, older
// than fences the new leader published to other gateways. The replicas
// confirm such answers with the log first (leader.MustConfirm), and
// checker 8 fails any a deposed replica sends; Stats.StaleResets counts
// those that reach a gateway all the same (0 in the sweep).
func (k *checker) checkFencesRise(gc *gatewayCheck, p *partCheck, part int, epoch uint64) {
	switch {
	case len(k.w.coords) <= 1 && epoch < p.fenceEpoch:
		k.w.fail("epochs only rise", "%s: fence %d published after fence %d", p.id, epoch, p.fenceEpoch)
	case len(k.w.coords) <= 1:
	case epoch < gc.received[part]:
		k.w.fail("epochs only rise", "%s: fence %d answered to a gateway after fence %d", p.id, epoch, gc.received[part])
	case epoch < p.fenceEpoch:
		k.w.stats.StaleResets++
	}
}

// ---- 3. no admission under an acknowledged fence -------------------------

// checkAckedFence: once a gateway acknowledged (polled with after ≥) the
// seq of fence e+1, it admits no fetch at epoch ≤ e for that partition,
// and none such is still in flight at the acknowledgement.
func (k *checker) checkAckedFence(g *gateway, e *fetchEntry) {
	acked := k.gws[g.idx].acked[e.part]
	if e.claims.Epoch < acked && !e.done {
		k.w.fail("acked fence", "%s: gateway %s acknowledged fence %d but has a fetch of %q at epoch %d (admitted %s)",
			k.parts[e.part].id, g.id, acked, e.member, e.claims.Epoch, e.admitted)
	}
}

// ---- 4. grants wait for safety -------------------------------------------

// checkGrantSafe: a new epoch is owned (granted, or persisted as owned)
// only after (a) every gateway is safe for the fence of the previous
// holder's epoch (see gatewaySafe), or the previous holder's capabilities
// all expired (exp + leeway + max_clock_skew), and (b) the previous holder
// released it (or rejoined as the same member: rejoined), was removed
// (session expired, left, replaced), or handoff_timeout passed since the
// revoke. The previous holder is the
// holder of the last epoch a capability was minted for; an epoch never
// minted leaves no capability behind.
func (k *checker) checkGrantSafe(p *partCheck, epoch uint64, holder string, prev *epochCheck) {
	now := k.w.now
	m := k.w.prof.machine
	if !k.expired(prev) {
		tag, tagged := p.fenceAbove(prev.epoch)
		for i, gc := range k.gws {
			if !k.gatewaySafe(k.w.gateways[i], gc, tag, tagged) {
				k.w.fail("grant safety", "%s: epoch %d granted to %q while gateway %s is not safe for the fence above epoch %d of %q (acked %d, fence seq %d (published %t))",
					p.id, epoch, holder, gatewayID(i), prev.epoch, prev.holder, gc.maxAck, tag, tagged)
				return
			}
		}
	}
	timedOut := prev.revoking && now >= prev.revokeStart+m.HandoffTimeout
	if !prev.released && !prev.rejoined && !k.removed[prev.holder] && !timedOut {
		k.w.fail("grant safety", "%s: epoch %d granted to %q before %q released epoch %d, left or timed out (revoking %t since %s)",
			p.id, epoch, holder, prev.holder, prev.epoch, prev.revoking, prev.revokeStart)
	}
}

// gatewaySafe reports whether gateway g can no longer admit a fetch
// under epochs below the fence tagged tag: it acknowledged the fence (any
// incarnation: a later one syncs after it), it is down (its next
// incarnation syncs after the fence), or no sync answer without the fence
// (seq below tag) went to a poll its incarnation sent within its
// sync_timeout: a gateway is in sync only through such an answer. The
// last clause holds only where gateways fence themselves: where they
// keep serving when cut off (silent_gateways: serve, as the gateways
// learned it) silence never makes one safe; only expiry (checkGrantSafe)
// does.
func (k *checker) gatewaySafe(g *gateway, gc *gatewayCheck, tag uint64, tagged bool) bool {
	if (tagged && gc.maxAck >= tag) || !g.up || gc.replyInc != g.inc {
		return true
	}
	i := len(gc.replies)
	if tagged {
		i, _ = slices.BinarySearchFunc(gc.replies, tag, func(r replyMark, seq uint64) int { return cmp.Compare(r.seq, seq) })
	}
	if k.w.prof.machine.SilentGateways == group.SilentGatewaysServe {
		return i == 0
	}
	return i == 0 || k.w.now-gc.replies[i-1].sentMax > k.w.prof.gateway.syncTimeout
}

// checkRevokeAnswered: an admin revoke is answered only once every
// gateway is safe for its fence (DESIGN §5): it refuses the last epoch
// below the fence that a capability was minted for, or every capability
// of that epoch expired.
func (k *checker) checkRevokeAnswered(p *partCheck, epoch uint64) {
	prev := p.epochs[p.lastMinted]
	for prev != nil && prev.epoch >= epoch {
		prev = p.epochs[prev.prevMinted] // the last epoch with a capability below the fence
	}
	if prev == nil || k.expired(prev) {
		return
	}
	tag, tagged := p.fenceAbove(prev.epoch)
	for i, gc := range k.gws {
		if !k.gatewaySafe(k.w.gateways[i], gc, tag, tagged) {
			k.w.fail("grant safety", "%s: admin revoke answered at fence %d while gateway %s is not safe for a fence above epoch %d of %q (acked %d, fence seq %d (published %t))",
				p.id, epoch, gatewayID(i), prev.epoch, prev.holder, gc.maxAck, tag, tagged)
			return
		}
	}
}

// expired reports whether every capability of an epoch expired on every
// clock: exp + leeway + max_clock_skew.
func (k *checker) expired(es *epochCheck) bool {
	m := k.w.prof.machine
	return base.Add(k.w.now).After(time.Unix(es.maxExpiry, 0).Add(m.Leeway + m.MaxClockSkew))
}

// fenceAbove is the tag of the first fence above epoch.
func (p *partCheck) fenceAbove(epoch uint64) (uint64, bool) {
	for _, t := range p.fenceTags {
		if t.epoch > epoch {
			return t.seq, true
		}
	}
	return 0, false
}

// ---- 5. no lost record ---------------------------------------------------

// checkNoLostRecord: after the heal-and-drain phase every record of every
// partition at an offset at or above the group's first committed/reset
// offset (0: offset_reset is earliest) was delivered at least once.
func (k *checker) checkNoLostRecord() {
	for _, p := range k.parts {
		end := k.w.kafka.end(p.index)
		for offset := range end {
			if offset >= int64(len(p.delivered)) || !p.delivered[offset] {
				k.w.fail("no lost record", "%s: record at offset %d (of %d) never delivered; %s", p.id, offset, end, k.describe(p))
				return
			}
		}
	}
}

// allDelivered reports whether every record was delivered at least once.
func (k *checker) allDelivered() bool {
	for _, p := range k.parts {
		end := k.w.kafka.end(p.index)
		if int64(len(p.delivered)) < end {
			return false
		}
		for offset := range end {
			if !p.delivered[offset] {
				return false
			}
		}
	}
	return true
}

// ---- 6. committed offsets ------------------------------------------------

// checkOffsetRises: a committed offset never moves backwards (no admin
// reset runs in the simulation).
func (k *checker) checkOffsetRises(p *partCheck, offset int64) {
	if offset < p.committed {
		k.w.fail("committed offsets", "%s: committed offset moved back from %d to %d", p.id, p.committed, offset)
	}
}

// checkStartOffset: a new owner starts at the last committed offset, or
// at offset_reset (earliest: 0) when nothing was committed; its first
// delivery starts there too (checked in delivered).
func (k *checker) checkStartOffset(p *partCheck, es *epochCheck, offset int64) {
	want := p.committed
	if want < 0 {
		want = 0
	}
	if offset != want {
		k.w.fail("committed offsets", "%s: epoch %d granted to %q at offset %d, last committed %d", p.id, es.epoch, es.holder, offset, p.committed)
	}
}

// ---- 7. duplicates across a handoff --------------------------------------

// checkHandoff: after a clean handoff (the previous holder released,
// committing exactly what it delivered) the new holder starts right there:
// zero duplicates, zero gap. Otherwise (crash, expiry, timeout) the
// duplicates are bounded by what the previous holder delivered after its
// last successful commit: the new start is at least that commit.
func (k *checker) checkHandoff(p *partCheck, es *epochCheck, start int64, prev *epochCheck) {
	if prev.cleanRelease {
		k.w.stats.CleanHandoffs++
		if start != prev.next {
			k.w.fail("handoff duplicates", "%s: clean release of epoch %d by %q at %d (delivered up to %d), but epoch %d starts at %d",
				p.id, prev.epoch, prev.holder, prev.releaseOffset, prev.next, es.epoch, start)
		}
		return
	}
	if prev.ackedCommit >= 0 && start < prev.ackedCommit {
		k.w.fail("handoff duplicates", "%s: epoch %d starts at %d, below the commit %d acknowledged to %q at epoch %d",
			p.id, es.epoch, start, prev.ackedCommit, prev.holder, prev.epoch)
	}
}

// checkDeliveredAfterRelease: a holder delivers nothing of an epoch after
// the coordinator accepted its release of it.
func (k *checker) checkDeliveredAfterRelease(p *partCheck, es *epochCheck, b session.Batch) {
	if es.released {
		k.w.fail("handoff duplicates", "%s: %q delivered offsets [%d, %d) of epoch %d after releasing it at %d",
			p.id, es.holder, b.Offset, b.Next, es.epoch, es.releaseOffset)
	}
}

// ---- 8. a deposed replica sends nothing new (replicas) -------------------

// checkDeposedAnswer: a replica fenced by another's takeover before a
// request reached it sends, for that request, no sync answer and no
// capability (DESIGN §9: a replica that believes it leads but is fenced
// sends nothing new). Answers released by a persist cannot (the persist
// fails fenced); the ones a machine gives from memory rest on the log's
// confirmation (leader.MustConfirm, store.WriteMark).
func (k *checker) checkDeposedAnswer(c *coordinator, kind reqKind, at arrival, msg group.Message) {
	r := c.rep
	if r == nil || !r.deposed || at.at < r.deposedAt {
		return
	}
	what := ""
	switch m := msg.(type) {
	case group.SyncReply:
		what = "a sync answer"
	case group.News:
		if len(m.Grants)+len(m.Renew) > 0 {
			what = "capabilities"
		}
	case group.JoinReply:
		if len(m.Grants) > 0 {
			what = "capabilities"
		}
	}
	if what != "" {
		k.w.fail("deposed sends nothing", "%s, deposed at %s, sent %s for a request (kind %d) that reached it at %s",
			r.cfg.ID, r.deposedAt, what, kind, at.at)
	}
}

// ---- 10. one member per join ------------------------------------------------

// checkOneMemberPerJoin: the attempts of one join carry one key
// (Idempotency-Key), and however many of them land — delivered twice,
// given up and retried at another replica, the first landing after the
// retry — they make one member: a repeat is answered the member the
// first made while it lives. Only once that member is gone (left,
// expired, revoked) may the key make another.
func (k *checker) checkOneMemberPerJoin(key, member string) {
	prev, ok := k.joinKeys[key]
	if ok && prev != member && !k.removed[prev] {
		k.w.fail("one member per join", "join key %s… answered member %q while %q, which an earlier attempt of the same join made, is still a member",
			key[:min(len(key), 8)], member, prev)
	}
}
