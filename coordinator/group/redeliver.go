package group

import (
	"slices"

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
// reset) is not covered: the shell does not learn of it, and the
// heartbeat request carries nothing saying what the member holds. Such a
// grant still comes back as a renewal before half the lease is left.

// redeliverNews puts back into the member's news what of an undelivered
// News still holds, and answers a held heartbeat with it (RedeliverNews).
func (m *Machine) redeliverNews(e RedeliverNews) {
	n := e.News
	mem := m.memberOf(n.Group, n.MemberID)
	if mem == nil {
		m.reject(e.Ref, api.CodeUnknownMember, "redeliver news: unknown member %q", n.MemberID)
		return
	}
	for _, ref := range n.Revoke {
		if stillRevoking(mem, ref) && !slices.Contains(mem.news.revoke, ref) {
			mem.news.revoke = append(mem.news.revoke, ref)
		}
	}
	for _, g := range n.Grants {
		if p := stillOwned(mem, g); p != nil {
			mem.news.addGrant(p)
		}
	}
	for _, g := range n.Renew {
		if p := stillOwned(mem, g); p != nil {
			mem.news.addRenewal(p)
		}
	}
	m.queueNews(mem)
	m.send(Done{Ref: e.Ref})
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
