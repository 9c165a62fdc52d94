package group

import (
	"fmt"
	"slices"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/assign"
)

// Redelivery of heartbeat news the shell could not hand over.
//
// Once a News leaves the machine, its grants count as sent (cap.sent) and
// leave the member's news: the machine believes the member holds them.
// When the shell then fails to mint them (a 500, "mint grants" or "mint
// renewals"), the member never got those capabilities, yet owns the
// partitions: nobody reads them until the next renewal (half the
// capability lease, 30 s by default) or a rejoin. A join has an undo for
// the same failure (UndoJoin: the member goes, its partitions move). A
// heartbeat's news is put back instead (RedeliverNews), for three reasons:
//
//   - undoing a grant means fencing it again (a fresh epoch, a gateway
//     round trip, another handoff) for a capability that never existed;
//     re-sending it means minting the very capability the machine decided
//     on: same holder, same epoch. One reader per partition and rising
//     epochs hold as they did, since nothing about the partition changes.
//   - the revokes of that answer were lost too, and a revoke cannot be
//     undone; it can only be told again (else the member learns of it
//     from a gateway's 409 on its next fetch — an idle member never —
//     and the handoff may wait handoff_timeout for its release).
//   - a renewal can be neither undone nor skipped: the member's
//     capability runs out at the old expiry.
//
// cap.sent stays true: the shell may have minted some of the capabilities
// before one failed, and a capability that may exist has to be released,
// fenced or expired before its partition moves. That only costs a move
// the wait the member's release takes, which the member can now give.
//
// An answer lost on the wire (the client timed out, the connection was
// reset) the shell does not learn of: fasthttp gives a handler no write
// result, and a write into a closed peer's socket buffer succeeds. The
// member does: its next heartbeat says resync (Heartbeat.Resync), and
// resync puts back everything the lost answer could have carried, as
// RedeliverNews would have: every partition the member owns, as a
// renewal at its epoch, and every revoke it has not released. Renewals,
// not grants: the member may hold some of them already (a renewal of a
// partition it does not hold is its grant: the SDK and docs/protocol.md
// say so), and the epoch is the one the machine decided, never a new one.
// The cost is bounded by what the member holds (at most its group's
// partitions, within limits.state_bytes) — what a join answer carries —
// and is paid only after a lost answer. Without it such a grant came back
// as a renewal once less than half the lease was left (29.6 s at the 60 s
// default), the partition fenced from everyone else and unread meanwhile.

// redeliverNews puts back into the member's news what of an undelivered
// News still holds, and answers a held heartbeat with it (RedeliverNews).
func (m *Machine) redeliverNews(e RedeliverNews) {
	n := e.News
	mem := m.memberOf(n.Group, n.MemberID)
	if mem == nil {
		m.reject(e.Ref, api.CodeUnknownMember, "redeliver news: unknown member %q", n.MemberID)
		return
	}
	m.putBack(mem, n)
	m.send(Done{Ref: e.Ref})
}

// ResyncEvery bounds how often one member's resync is honoured. A resync
// re-renders every capability the member holds, and is answered at once:
// honoured on every heartbeat, a member saying resync in a loop would
// make the coordinator sign its whole assignment as fast as it could ask
// (a tenant stalling every other). One asked for within ResyncEvery of
// the last is not dropped — the member may have lost a second answer —
// but is due (member.resyncDue) and honoured at the member's first
// heartbeat after the window, resync said or not: safety never rested on
// it (renewals carry the epoch the machine decided), only how soon a lost
// grant comes back, which stays within ResyncEvery plus one heartbeat.
const ResyncEvery = time.Second

// resyncAtMostEvery honours a resync of mem unless one was honoured
// within ResyncEvery, in which case it is due after.
func (m *Machine) resyncAtMostEvery(mem *member) {
	if !mem.lastResync.IsZero() && m.now.Before(mem.lastResync.Add(ResyncEvery)) {
		mem.resyncDue = true
		return
	}
	mem.lastResync, mem.resyncDue = m.now, false
	m.resync(mem)
}

// resync puts back (putBack) everything a lost answer to mem could have
// carried: a renewal of every partition it owns, at its epoch, and a
// revoke of every partition being revoked from it and not released.
func (m *Machine) resync(mem *member) {
	var n News
	for _, p := range heldSorted(mem) {
		switch s := p.own.(type) {
		case *owned:
			g := m.grantOf(p)
			m.audit.renewed(p, g) // the epoch granted to this member, no other
			n.Renew = append(n.Renew, g)
		case *revoking:
			n.Revoke = append(n.Revoke, api.PartitionRef{Topic: p.id.Topic, Partition: p.id.Partition, Epoch: s.fromEpoch})
		}
	}
	m.putBack(mem, n)
}

// putBack adds to mem's news what of n still holds (stillOwned,
// stillRevoking) and queues it: a held heartbeat is answered at once.
func (m *Machine) putBack(mem *member, n News) {
	for _, ref := range n.Revoke {
		if stillRevoking(mem, ref) && !slices.Contains(mem.news.revoke, ref) {
			mem.news.revoke = append(mem.news.revoke, ref)
		}
	}
	for _, g := range n.Grants {
		if p := stillOwned(mem, g); p != nil {
			takeBack(p, g)
			mem.news.addGrant(p)
		}
	}
	for _, g := range n.Renew {
		if p := stillOwned(mem, g); p != nil {
			takeBack(p, g)
			mem.news.addRenewal(p)
		}
	}
	mem.news.paid += n.Paid
	if !mem.news.empty() {
		m.queueNews(mem)
	}
}

// deferNews holds e.Ref, a heartbeat of the member answered but not yet
// delivered, until e.NotBefore, its news put back (DeferNews).
func (m *Machine) deferNews(e DeferNews) {
	n := e.News
	mem := m.memberOf(n.Group, n.MemberID)
	if mem == nil {
		m.reject(e.Ref, api.CodeUnknownMember, "defer news: unknown member %q", n.MemberID)
		return
	}
	if len(n.Revoke) > 0 {
		panic(fmt.Sprintf("group: deferred news of %s/%s carries revokes %v: a revoke never waits", n.Group, n.MemberID, n.Revoke))
	}
	notBefore := earlier(e.NotBefore, m.now.Add(mem.sessionTimeout))
	mem.news.notBefore = maxTime(mem.news.notBefore, notBefore)
	n.Paid = e.Paid // every token paid for n, n.Paid among them
	m.putBack(mem, n)
	ref, until := e.Ref, earlier(earlier(notBefore, e.Until), m.now.Add(m.cfg.HeartbeatWait))
	switch {
	case mem.wait.held: // a newer heartbeat of the member: it gets the news
		m.send(News{Ref: e.Ref, Group: mem.group.name, MemberID: mem.id})
		ref, until = mem.wait.ref, earlier(mem.wait.until, notBefore)
	case m.heldHeartbeats[mem.credential.tenant()] >= m.cfg.Limits.HeldHeartbeatsPerTenant:
		m.send(News{Ref: e.Ref, Group: mem.group.name, MemberID: mem.id}) // the next heartbeat gets it
		return
	}
	m.holdHeartbeat(mem, ref, until)
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// stillOwned is g's partition when mem still owns it at g's epoch.
func stillOwned(mem *member, g Grant) *partition {
	p := mem.group.parts[assign.Partition{Topic: g.Topic, Partition: g.Partition}]
	if p == nil || p.epoch != g.Epoch {
		return nil
	}
	if o := p.owner(); o == nil || !o.cap.holder.member(mem.id) {
		return nil
	}
	return p
}

// takeBack undoes g's handOut when g is the capability last handed:
// the member never got it, so it holds what it held before (HeldUntil),
// and pacing (PaceNews) sees the partition as urgent as it was. A
// resync's renewals say none (HeldUntil zero): the member lost an
// answer, so what it holds is not known, and the partition is as urgent
// as a grant.
func takeBack(p *partition, g Grant) {
	if o := p.owner(); o != nil && o.cap.handed.Equal(g.ExpiresAt) {
		o.cap.handed = g.HeldUntil
	}
}

// stillRevoking reports whether ref's partition is still being revoked
// from mem at ref's epoch, not yet released.
func stillRevoking(mem *member, ref api.PartitionRef) bool {
	p := mem.group.parts[assign.Partition{Topic: ref.Topic, Partition: ref.Partition}]
	if p == nil {
		return false
	}
	r := p.revocation()
	return r != nil && r.from.holder.member(mem.id) && r.fromEpoch == ref.Epoch && !r.released
}
