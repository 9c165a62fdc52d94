package sim

import (
	"fmt"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client/session"
	"github.com/capgate/capgate/coordinator/group"
	"github.com/capgate/capgate/ocap"
)

// The checker's record of the run: the parts report what they did (a
// fetch admitted, a poll sent, a Ready persisted, a grant minted, a batch
// delivered) and the checks that depend on it run right there.

// admitted records a fetch a gateway admitted.
func (k *checker) admitted(e *fetchEntry) {
	p := k.parts[e.part]
	p.inflight = append(p.inflight, e)
	k.checkAckedFence(e.gw, e)
	k.checkExclusiveReader(e)
	k.checkAdmissionOrder(e)
}

// ended records that an admitted fetch answered or was cancelled.
func (k *checker) ended(e *fetchEntry) {
	p := k.parts[e.part]
	for i, x := range p.inflight {
		if x == e {
			p.inflight = append(p.inflight[:i], p.inflight[i+1:]...)
			return
		}
	}
}

// served records a fetch answering with data.
func (k *checker) served(e *fetchEntry) { k.checkExclusiveReader(e) }

// resynced records a gateway whose sync succeeded: its fetches may serve
// again.
func (k *checker) resynced(g *gateway) {
	for _, e := range g.fetches() {
		k.checkExclusiveReader(e)
	}
}

// acked records gateway g sending a poll that acknowledges after.
func (k *checker) acked(g *gateway, after uint64) {
	gc := k.gws[g.idx]
	gc.maxAck = max(gc.maxAck, after)
	if gc.inc != g.inc {
		gc.inc, gc.ackIndex = g.inc, 0
		clear(gc.acked)
	}
	for gc.ackIndex < len(k.fences) && k.fences[gc.ackIndex].seq <= after {
		t := k.fences[gc.ackIndex]
		gc.acked[t.part] = max(gc.acked[t.part], t.epoch)
		gc.ackIndex++
	}
	for _, e := range g.fetches() {
		k.checkAckedFence(g, e)
	}
}

// replyMark is a sync answer sent to a gateway: its seq, and the latest
// send time of the polls answered so far.
type replyMark struct {
	seq     uint64
	sentMax time.Duration
}

// syncSent records a sync answer to a poll gateway i's incarnation inc
// sent at sent leaving the coordinator.
func (k *checker) syncSent(i, inc int, sent time.Duration, u api.SyncResponse) {
	gc := k.gws[i]
	if gc.replyInc != inc {
		gc.replyInc, gc.replies = inc, gc.replies[:0]
	}
	if n := len(gc.replies); n > 0 {
		sent = max(sent, gc.replies[n-1].sentMax)
	}
	gc.replies = append(gc.replies, replyMark{seq: u.Seq, sentMax: sent})
	if k.w.tracing() {
		k.w.tracef("sync reply seq=%d reset=%t fences=%v", u.Seq, u.Reset, u.Fences)
	}
	top := map[int]uint64{}
	for _, f := range u.Fences {
		if f.Group != groupName {
			continue
		}
		i := k.w.kafka.index[partitionOf(f.Topic, f.Partition)]
		top[i] = max(top[i], f.Epoch)
	}
	for i := range k.parts {
		epoch, ok := top[i]
		if !ok {
			continue
		}
		p := k.parts[i]
		if u.Reset {
			k.checkFencesRise(gc, p, i, epoch)
		}
		if gc.received == nil {
			gc.received = map[int]uint64{}
		}
		gc.received[i] = max(gc.received[i], epoch)
		if epoch > p.fenceEpoch {
			p.fenceEpoch = epoch
			t := fenceTag{seq: u.Seq, part: i, epoch: epoch}
			p.fenceTags = append(p.fenceTags, t)
			k.fences = append(k.fences, t)
		}
	}
}

// minted records a capability leaving the coordinator in a grant or
// renewal; start is its start offset, resolved.
func (k *checker) minted(c *ocap.Claims, start int64) {
	if k.w.tracing() {
		k.w.tracef("minted %s/%d epoch=%d holder=%s offset=%d exp=%d", c.Topic, c.PartitionNumber(), c.Epoch, c.Subject, start, c.ExpiresAt)
	}
	p := k.part(c.Topic, c.PartitionNumber())
	k.checkEpochsRise(p, c.Epoch, c.Subject)
	k.owned(p, c.Epoch, c.Subject)
	es := p.epochs[c.Epoch]
	if es == nil {
		return // an epoch below the latest owned one; checkEpochsRise failed
	}
	if !es.minted {
		k.firstMint(p, es, start)
	}
	p.grantEpoch, p.grantHolder = c.Epoch, c.Subject
	es.maxExpiry = max(es.maxExpiry, int64(c.ExpiresAt))
}

// owned records that epoch of p is owned by holder (a persisted record or
// a grant, whichever comes first): the handoff to it completed.
func (k *checker) owned(p *partCheck, epoch uint64, holder string) {
	if epoch <= p.ownedEpoch {
		return
	}
	if prev := p.epochs[p.ownedEpoch]; prev != nil && prev.minted {
		k.checkGrantSafe(p, epoch, holder, prev)
	}
	p.epochs[epoch] = &epochCheck{epoch: epoch, holder: holder, prevMinted: p.lastMinted, releaseOffset: -1, ackedCommit: -1}
	p.ownedEpoch = epoch
}

// firstMint records the first capability of an epoch: where its holder
// starts, and how the handoff from the last epoch with a capability went.
func (k *checker) firstMint(p *partCheck, es *epochCheck, start int64) {
	es.minted, es.grantOffset, es.next = true, start, start
	k.checkStartOffset(p, es, start)
	if prev := p.epochs[es.prevMinted]; prev != nil && prev.minted {
		k.w.stats.Handoffs++
		if prev.holder == es.holder {
			k.w.stats.Refences++
		}
		k.checkHandoff(p, es, start, prev)
	}
	p.lastMinted = es.epoch
	k.w.trace.mix(uint64(p.index)<<48 | es.epoch)
}

// persisted records what a Ready wrote to the store.
func (k *checker) persisted(records []group.Record) {
	for _, r := range records {
		switch r := r.(type) {
		case group.PartitionRecord:
			if k.w.tracing() {
				k.w.tracef("persist %s/%d epoch=%d state=%s holder=%s@%d target=%s released=%t", r.Topic, r.Partition, r.Epoch, r.State, r.Holder, r.HolderEpoch, r.Target, r.Released)
			}
			k.partitionPersisted(r)
		case group.OffsetRecord:
			p := k.part(r.Topic, r.Partition)
			k.checkOffsetRises(p, r.Offset)
			p.committed = r.Offset
		case group.MemberRecord:
			if k.w.tracing() {
				k.w.tracef("persist member %s deleted=%t", r.MemberID, r.Deleted)
			}
			if r.Deleted {
				k.removed[r.MemberID] = true
			}
		}
	}
}

// partitionPersisted records a partition's state written to the store.
func (k *checker) partitionPersisted(r group.PartitionRecord) {
	p := k.part(r.Topic, r.Partition)
	k.checkPersistedEpoch(p, r.Epoch)
	p.persistedEpoch = r.Epoch
	switch r.State {
	case group.Owned:
		k.owned(p, r.HolderEpoch, r.Holder)
	case group.Revoking:
		if es := p.epochs[r.HolderEpoch]; es != nil && !es.revoking {
			es.revoking, es.revokeStart = true, k.w.now
		}
	}
}

// commitAccepted records a commit the coordinator accepted.
func (k *checker) commitAccepted(member string, offsets []group.CommitOffset, release bool) {
	if k.w.tracing() {
		k.w.tracef("commit accepted %s release=%t %+v", member, release, offsets)
	}
	for _, o := range offsets {
		p := k.part(o.Topic, o.Partition)
		es := p.epochs[o.Epoch]
		if es == nil || es.holder != member {
			continue
		}
		if o.Offset >= 0 {
			es.ackedCommit = max(es.ackedCommit, o.Offset)
			p.committed = max(p.committed, o.Offset)
		}
		if release && !es.released { // revoking, or given up while owned
			es.released, es.releaseOffset = true, o.Offset
			es.cleanRelease = o.Offset == es.next || (o.Offset < 0 && es.next == es.grantOffset)
		}
	}
}

// rejoined records a join answered with a member that was there before
// (group.JoinReply.Created false: the repeat of a keyed join whose
// earlier attempt made the member, its answer given up). A rejoin
// fences what the member holds and grants it to the member again; the
// machine counts it as the old incarnation's release (the gateways'
// fence is still waited for: checkGrantSafe's first clause). The
// epochs granted in the answer itself (an epoch never minted needs no
// fence wait: persisted as owned already) are the new incarnation's.
// It is no release by the holder: when the repeat landed after the
// retry's answer (a stall), the process holds the fenced epoch and may
// still deliver what a gateway answered before the fence — a forced
// handoff, whose duplicates checker 7 bounds by the last commit.
func (k *checker) rejoined(member string, grants []group.Grant) {
	granted := map[*epochCheck]bool{}
	for _, g := range grants {
		granted[k.part(g.Topic, g.Partition).epochs[g.Epoch]] = true
	}
	for _, p := range k.parts {
		for _, es := range p.epochs {
			if es.holder == member && !es.released && !granted[es] {
				es.rejoined = true
			}
		}
	}
}

// landedRepeat: the coordinator accepted a commit naming an epoch of a
// partition below one owned before this Ready — only a repeat of a commit
// that landed under it is (group's landed: answered done, nothing
// applied). For the stats.
func (k *checker) landedRepeat(offsets []group.CommitOffset) bool {
	for _, o := range offsets {
		if o.Epoch < k.part(o.Topic, o.Partition).ownedEpoch {
			return true
		}
	}
	return false
}

// keyedJoin records the member a join with key was answered (persisted),
// and checks that every attempt of one join names one member.
func (k *checker) keyedJoin(key, member string) {
	if k.joinKeys == nil {
		k.joinKeys = map[string]string{}
	}
	k.checkOneMemberPerJoin(key, member)
	k.joinKeys[key] = member
}

// revokeAnswered records an admin revoke's answer leaving the coordinator.
func (k *checker) revokeAnswered(r group.RevokeReply) {
	k.checkRevokeAnswered(k.part(r.Topic, r.Partition), r.Epoch)
}

// delivered records a batch handed to the user of consumer c.
func (k *checker) delivered(c *consumer, b session.Batch) {
	p := k.part(b.Partition.Topic, b.Partition.Partition)
	member := c.member()
	es := p.epochs[b.Epoch]
	switch {
	case es == nil || es.holder != member:
		k.w.fail("handoff duplicates", "%s: %q delivered offsets [%d, %d) at epoch %d, which it was never granted", p.id, member, b.Offset, b.Next, b.Epoch)
		return
	}
	offset := b.Offset
	if offset < 0 {
		// The first fetch of a grant at an unresolved start offset went out
		// as offset=earliest|latest; the records tell where it read.
		offset = b.Next - int64(b.Records)
		k.w.stats.SentinelStarts++
	}
	if offset != es.next {
		k.w.fail("committed offsets", "%s: %q delivered from %d at epoch %d, expected %d (start %d)", p.id, member, offset, b.Epoch, es.next, es.grantOffset)
		return
	}
	b.Offset = offset
	k.checkDeliveredAfterRelease(p, es, b)
	values, _ := b.Payload.([]int64)
	log := k.w.kafka.logs[p.index]
	if len(values) != b.Records || b.Next != b.Offset+int64(b.Records) {
		k.w.fail("no lost record", "%s: batch [%d, %d) holds %d records", p.id, b.Offset, b.Next, len(values))
		return
	}
	for i, v := range values {
		offset := b.Offset + int64(i)
		if v != log[offset] {
			k.w.fail("no lost record", "%s: offset %d delivered value %d, the log has %d", p.id, offset, v, log[offset])
			return
		}
		k.markDelivered(p, offset)
	}
	es.next = b.Next
	k.w.stats.Delivered += len(values)
}

func (k *checker) markDelivered(p *partCheck, offset int64) {
	for int64(len(p.delivered)) <= offset {
		p.delivered = append(p.delivered, false)
	}
	if p.delivered[offset] {
		k.w.stats.Duplicates++
	}
	p.delivered[offset] = true
}

// describe renders a partition's history for a failure message.
func (k *checker) describe(p *partCheck) string {
	es := p.epochs[p.grantEpoch]
	if es == nil {
		return "never granted"
	}
	return fmt.Sprintf("last grant epoch %d to %q at %d, delivered up to %d, released %t; owned epoch %d, persisted epoch %d, committed %d",
		es.epoch, es.holder, es.grantOffset, es.next, es.released, p.ownedEpoch, p.persistedEpoch, p.committed)
}
