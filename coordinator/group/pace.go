package group

import (
	"slices"
	"time"
)

// PaceNews splits n when its tenant's rate pays for only k of its
// capabilities (the shell's paceMints): now carries n's revokes and the
// k most urgent grants and renewals, later the rest, for the member's
// next heartbeats (RedeliverNews). Urgency is earliest deadline first:
// a capability's deadline is when the holder's current one ends
// (Grant.HeldUntil), a grant's — or a renewal's whose holder holds none
// this machine knows of (after a takeover, or a resync) — comes first of
// all, since the partition is not readable; ties go grants first, then
// topic and partition. A capability handed out leaves the holder with
// the latest deadline of all, so under a rate that pays for fewer
// capabilities than are due each partition is served in turn, and none
// waits behind another's next renewal: in partition order, as before,
// the first partitions came due again before the last were reached,
// and those got none as long as the deficit lasted (a member owning
// them, nobody reading them).
//
// Pure: no clock (the deadlines are in the grants), no IO. now's and
// later's lists are in topic and partition order, as answers are.
func PaceNews(n News, k int) (now, later News) {
	now = News{Ref: n.Ref, Group: n.Group, MemberID: n.MemberID, Revoke: n.Revoke}
	later = News{Group: n.Group, MemberID: n.MemberID}
	type item struct {
		g     Grant
		grant bool
	}
	items := make([]item, 0, len(n.Grants)+len(n.Renew))
	for _, g := range n.Grants {
		items = append(items, item{g, true})
	}
	for _, g := range n.Renew {
		items = append(items, item{g, false})
	}
	slices.SortFunc(items, func(a, b item) int {
		if c := a.g.HeldUntil.Compare(b.g.HeldUntil); c != 0 { // none (zero) first
			return c
		}
		if a.grant != b.grant {
			if a.grant {
				return -1
			}
			return 1
		}
		return cmpTopicPartition(a.g.Topic, a.g.Partition, b.g.Topic, b.g.Partition)
	})
	for i, it := range items {
		dst := &later
		if i < k {
			dst = &now
		}
		if it.grant {
			dst.Grants = append(dst.Grants, it.g)
		} else {
			dst.Renew = append(dst.Renew, it.g)
		}
	}
	for _, l := range [][]Grant{now.Grants, now.Renew, later.Grants, later.Renew} {
		slices.SortFunc(l, func(a, b Grant) int { return cmpTopicPartition(a.Topic, a.Partition, b.Topic, b.Partition) })
	}
	return now, later
}

// Unreadable counts n's grants and renewals whose partition the member
// cannot read at `at`: every grant, and a renewal whose holder holds no
// capability this machine knows of or one that ended by then
// (Grant.HeldUntil). What a held heartbeat waits for more tokens for
// (the shell's paceMints): holding an answer the rate paid for already
// delays what it carries, worth it for partitions nobody reads — each
// heartbeat's own token saved brings them sooner — not for renewals of
// capabilities still good, and never for a moved partition's grant
// behind them.
//
// Pure: at is an argument.
func Unreadable(n News, at time.Time) int {
	count := len(n.Grants)
	for _, g := range n.Renew {
		if g.HeldUntil.IsZero() || !g.HeldUntil.After(at) {
			count++
		}
	}
	return count
}
