package group

import (
	"fmt"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/assign"
)

// Commit rules (DESIGN §4): a commit needs the partition's current epoch
// while the member owns it, or the member's own (older) epoch while the
// partition is being revoked from it. Anything else is stale; an offset
// below the committed one is a regression. A commit is all or nothing.
// An outside lease holder (Commit.Outside) commits the same way with its
// lease capability; it has no member and cannot release.

func (m *Machine) commit(e Commit) {
	if e.Outside {
		m.commitOutside(e)
		return
	}
	mem := m.memberOf(e.Group, e.MemberID)
	if mem == nil {
		m.reject(e.Ref, api.CodeUnknownMember, "commit: unknown member %q", e.MemberID)
		return
	}
	m.contact(mem)
	if len(e.Offsets) == 0 {
		m.reject(e.Ref, api.CodeBadRequest, "commit: no offsets")
		return
	}
	if !m.commitOffsets(e.Ref, mem.group, holder{id: mem.id}, e.Offsets, e.Release) {
		return
	}
	m.replyCommit(e.Ref, mem.group, e.Offsets)
}

// commitOutside is a commit by an outside lease holder: the partition
// must be held by that holder (owned, or being revoked from it), under
// the same epoch rules as a member's.
func (m *Machine) commitOutside(e Commit) {
	g := m.groupNamed(e.Group)
	switch {
	case g == nil:
		m.reject(e.Ref, api.CodeNotFound, "commit: unknown group %q", e.Group)
	case len(e.Offsets) == 0:
		m.reject(e.Ref, api.CodeBadRequest, "commit: no offsets")
	case e.Release:
		m.reject(e.Ref, api.CodeBadRequest, "commit: an outside lease holder cannot release; its lease ends with its ttl or an admin revoke")
	default:
		if m.commitOffsets(e.Ref, g, holder{id: e.MemberID, outside: true}, e.Offsets, false) {
			m.replyCommit(e.Ref, g, e.Offsets)
		}
	}
}

// replyCommit answers a commit with the offsets now committed.
func (m *Machine) replyCommit(ref Ref, g *group, offsets []CommitOffset) {
	reply := CommitReply{Ref: ref}
	for _, o := range offsets {
		p := g.parts[assign.Partition{Topic: o.Topic, Partition: o.Partition}]
		if p.committed >= 0 {
			reply.Committed = append(reply.Committed, api.CommittedOffset{
				Topic: o.Topic, Partition: o.Partition, Offset: p.committed, Metadata: p.metadata,
			})
		}
	}
	m.send(reply)
}

// commitOffsets validates and applies offsets committed by h; on a
// refusal it sends the rejection and changes nothing. An offset that
// landed already (landed: a repeat of a commit whose answer was lost,
// after its partition moved on) is taken as done and changes nothing,
// and an offset committed again unchanged writes nothing.
func (m *Machine) commitOffsets(ref Ref, g *group, h holder, offsets []CommitOffset, release bool) bool {
	seen := make(map[assign.Partition]bool, len(offsets))
	var done map[assign.Partition]bool // landed before: nothing to apply
	for _, o := range offsets {
		id := assign.Partition{Topic: o.Topic, Partition: o.Partition}
		if seen[id] {
			m.reject(ref, api.CodeBadRequest, "commit: %s/%d listed twice", o.Topic, o.Partition)
			return false
		}
		seen[id] = true
		code, err := m.checkOffset(g, h, o, release)
		switch {
		case err == nil:
		case code == api.CodeStaleEpoch && landed(g.parts[id], o, release):
			if done == nil {
				done = make(map[assign.Partition]bool)
			}
			done[id] = true
		default:
			m.reject(ref, code, "commit %s/%d: %v", o.Topic, o.Partition, err)
			return false
		}
	}
	if grows := metadataGrowth(g, offsets); grows > 0 && (!m.admitState(ref, "commit", grows) || !m.admitTenantState(ref, "commit", g.creator, m.holderTenant(g, h), grows)) {
		return false
	}
	for _, o := range offsets {
		id := assign.Partition{Topic: o.Topic, Partition: o.Partition}
		if done[id] {
			continue
		}
		p := g.parts[id]
		switch {
		case o.Offset >= 0 && !landed(p, o, release):
			m.audit.committed(p, o.Offset, false)
			p.setCommitted(o.Offset, o.Metadata, o.Epoch)
			m.markOffset(p)
		case o.Offset < 0 && p.committed >= 0 && p.committedEpoch != o.Epoch:
			m.keepOffset(p, o.Epoch) // a release without an offset
		}
		if !release {
			continue
		}
		switch s := p.own.(type) {
		case *revoking:
			if !s.released {
				s.released = true
				m.markDirty(p)
				m.tryComplete(p)
			}
		case *owned:
			m.giveUp(p, s)
		}
	}
	return true
}

// landed reports whether o is committed already, exactly: its offset and
// metadata are p's, committed by a capability of o's epoch — or, for a
// release without an offset (release, o.Offset < 0), p's committed
// offset is the one the holder of o's epoch left standing when it
// released (keepOffset). An epoch is
// granted to one holder (every grant a fresh epoch), and the shell takes
// only the committing member's own capabilities (driver.CommitOffsets),
// so the commit that set them was this holder's at that epoch: o repeats
// it. A commit (a release too) whose first attempt landed but whose
// answer was lost — a replica frozen after its write, a hedged attempt
// answered refused — is then answered as done when its repeat finds the
// partition moved on (stale_epoch before): the offsets are committed,
// and the epoch it would release is gone already. Nothing is applied for
// it: a release repeated after the partition came back to the holder
// under a newer epoch never releases that one. A partition whose offset
// another commit or an admin reset changed since is no repeat (stale).
func landed(p *partition, o CommitOffset, release bool) bool {
	if p == nil || o.Epoch == 0 || p.committedEpoch != o.Epoch {
		return false
	}
	if o.Offset < 0 {
		return release
	}
	return p.committed == o.Offset && p.metadata == o.Metadata
}

// keepOffset records that the holder of epoch released p without an
// offset, leaving its committed offset standing: the offset's epoch
// becomes the releasing one (persisted with it, OffsetRecord.Epoch and
// Kept), so a repeat of the release after the partition moved on is
// known for the release that landed (landed) — through a restart and a
// takeover — with nothing more kept per partition. Where nothing is
// committed there is no offset to carry the epoch: such a repeat stays
// stale_epoch. Either way the partition's own state, from which
// the next holder starts, is unchanged: the same offset and metadata.
func (m *Machine) keepOffset(p *partition, epoch uint64) {
	if !p.offsetDirty {
		p.offsetKept = true
	}
	p.committedEpoch = epoch
	m.markOffset(p)
}

// metadataGrowth is how much committing offsets (checked) would change
// the estimate of committed metadata: a commit that does not grow it
// (the same, less or no metadata) is never refused for the state budget.
func metadataGrowth(g *group, offsets []CommitOffset) int64 {
	var n int64
	for _, o := range offsets {
		if o.Offset >= 0 {
			n += metadataCost(o.Metadata) - metadataCost(g.parts[assign.Partition{Topic: o.Topic, Partition: o.Partition}].metadata)
		}
	}
	return n
}

func (m *Machine) checkOffset(g *group, h holder, o CommitOffset, release bool) (api.Code, error) {
	p := g.parts[assign.Partition{Topic: o.Topic, Partition: o.Partition}]
	if c, _ := p.outstandingOrNil(); c == nil || c.holder != h {
		what := "member"
		if h.outside {
			what = "outside holder"
		}
		return api.CodeStaleEpoch, fmt.Errorf("%s %q does not hold it", what, h.id)
	}
	if !p.commitEpoch(o.Epoch) {
		return api.CodeStaleEpoch, fmt.Errorf("epoch %d is not current (epoch %d, %s)", o.Epoch, p.epoch, p.state())
	}
	switch {
	case len(o.Metadata) > m.cfg.Limits.CommitMetadataBytes:
		return api.CodeBadRequest, fmt.Errorf("metadata of %d bytes, at most %d (coordinator.groups.limits.commit_metadata_bytes)", len(o.Metadata), m.cfg.Limits.CommitMetadataBytes)
	case o.Offset < 0 && !release:
		return api.CodeBadRequest, fmt.Errorf("offset %d < 0", o.Offset)
	case o.Offset >= 0 && o.Offset < p.committed:
		return api.CodeOffsetRegression, fmt.Errorf("offset %d is below the committed offset %d", o.Offset, p.committed)
	}
	return "", nil
}

// giveUp handles the release of a partition its holder still owns: the
// holder stopped reading (a gateway refused its capability for another
// reason than a fence, such as a denied jti), so the partition is fenced
// and reassigned — possibly back to the same member under a fresh epoch
// and capability — without waiting for a release that already came.
func (m *Machine) giveUp(p *partition, o *owned) {
	o.givenUp = true
	o.force = max(o.force, forceRevoke)
	m.queueReassign(p.group)
}

// commitEpoch reports whether a capability at epoch may commit: the
// current epoch while owned, the holder's while it is revoked from it and
// no offset reset forced the move.
func (p *partition) commitEpoch(epoch uint64) bool {
	switch s := p.own.(type) {
	case *owned:
		return epoch == p.epoch
	case *revoking:
		return epoch == s.fromEpoch && !s.forced
	}
	return false
}
