package harness

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// newGrants returns the first grant of each (partition, epoch, member), in
// time order, without renewals: the grants that start a holding.
func newGrants(grants []Grant) []Grant {
	type grantKey struct {
		key    PartitionKey
		epoch  uint64
		member string
	}
	seen := map[grantKey]bool{}
	var out []Grant
	for _, g := range grants {
		k := grantKey{g.Key, g.Epoch, g.Member}
		if seen[k] {
			continue
		}
		seen[k] = true
		if !g.Renewal {
			out = append(out, g)
		}
	}
	return out
}

// previousHolding is the grant with the highest epoch below g's for g's
// partition: the holding g's handoff ends.
func previousHolding(grants []Grant, g Grant) (Grant, bool) {
	var prev Grant
	found := false
	for _, o := range grants {
		if o.Key == g.Key && o.Epoch < g.Epoch && (!found || o.Epoch > prev.Epoch) {
			prev, found = o, true
		}
	}
	return prev, found
}

// CheckGrantAfterSafe: a grant of epoch e' for a partition whose previous
// holding was epoch e (held by A) comes only after
//   - every gateway the coordinator knew was safe for the fence: it had
//     acknowledged (to the coordinator) an answer carrying a fence > e, or
//     it had been silent for gateway_timeout, or it had left (a leave
//     sent after its last poll heard: it stopped serving first), or A's
//     capability had expired (exp + leeway + max_clock_skew); and
//   - A released the partition (a release commit at epoch e that was
//     accepted, or whose answer never came), left, died (silent for
//     session_timeout), or handoff_timeout passed since the revoke
//     started.
//
// Every bound errs towards allowing: a violation is a certain one.
func CheckGrantAfterSafe(s Snapshot, p Params) []Violation {
	var out []Violation
	forwarded := func(poll SyncPoll) Time { return poll.Forwarded }
	acks := map[string]map[PartitionKey][]fenceAck{}
	for _, g := range newGrants(s.Grants) {
		prev, ok := previousHolding(s.Grants, g)
		if !ok {
			continue
		}
		for _, gw := range knownGateways(s, g.At) {
			if acks[gw] == nil {
				acks[gw] = gatewayAcks(s, gw, forwarded)
			}
			if why := unsafeGateway(s, p, gw, acks[gw][g.Key], prev, g); why != "" {
				out = append(out, Violation{InvGrantAfterSafe, g.At, fmt.Sprintf("%s: epoch %d granted to %s (%s) after epoch %d of %s, but %s",
					g.Key, g.Epoch, g.Member, g.Consumer, prev.Epoch, prev.Member, why)})
			}
		}
		if why := holderNotDone(s, p, prev, g); why != "" {
			out = append(out, Violation{InvGrantAfterSafe, g.At, fmt.Sprintf("%s: epoch %d granted to %s (%s) after epoch %d of %s, but %s",
				g.Key, g.Epoch, g.Member, g.Consumer, prev.Epoch, prev.Member, why)})
		}
	}
	return out
}

// heard reports whether poll reached the coordinator — the leading
// replica — before t: a poll a standby answered not_leader did not.
func heard(poll SyncPoll, t Time) bool {
	return poll.Forwarded != 0 && poll.Forwarded < t && !poll.NotLeader
}

// knownGateways lists the gateways whose polls reached the coordinator
// before t.
func knownGateways(s Snapshot, t Time) []string {
	seen := map[string]bool{}
	for _, poll := range s.SyncPolls {
		if heard(poll, t) {
			seen[poll.Gateway] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// unsafeGateway says why gateway gw was not safe for prev's fence when g
// was granted, or "".
func unsafeGateway(s Snapshot, p Params, gw string, acked []fenceAck, prev, g Grant) string {
	if fence, _ := ackedFence(acked, g.At); fence > prev.Epoch {
		return ""
	}
	var last Time
	for _, poll := range s.SyncPolls {
		if poll.Gateway == gw && heard(poll, g.At) {
			last = max(last, poll.Forwarded)
		}
	}
	if g.At.Sub(last) > p.GatewayTimeout {
		return "" // silent: it refused everything itself meanwhile
	}
	if leftSince(s, gw, last, g.At) {
		return "" // it stopped serving, then said so
	}
	if expires := holdingExpires(s.Grants, prev); expires != 0 && g.At > expires.Add(p.Leeway+p.MaxClockSkew) {
		return ""
	}
	fence, _ := ackedFence(acked, g.At)
	return fmt.Sprintf("gateway %s had acknowledged only fence %d, was heard from at %s, and the old capability lasts until %s",
		gw, fence, last, holdingExpires(s.Grants, prev))
}

// leftSince reports whether gateway gw sent a leave (it had stopped
// serving) after its last poll the coordinator heard, last, and before
// t: a gateway that polls again after its leave is a new one, which
// must acknowledge the fence itself.
func leftSince(s Snapshot, gw string, last, t Time) bool {
	for _, l := range s.GatewayLeaves {
		if l.Gateway == gw && l.Sent >= last && l.Sent < t {
			return true
		}
	}
	return false
}

// holdingExpires is the latest expiry granted or renewed to prev's
// member at prev's epoch.
func holdingExpires(grants []Grant, prev Grant) Time {
	var exp Time
	for _, g := range grants {
		if g.Key == prev.Key && g.Epoch == prev.Epoch && g.Member == prev.Member {
			exp = max(exp, g.Expires)
		}
	}
	return exp
}

// holderNotDone says why prev's holder was not done with the partition
// when g was granted, or "".
func holderNotDone(s Snapshot, p Params, prev, g Grant) string {
	var lastCall Time
	for _, c := range s.Calls {
		if c.Member != prev.Member || c.Sent >= g.At {
			continue
		}
		lastCall = max(lastCall, c.Sent)
		if c.Op == "leave" && (c.Status == 200 || c.Status == 0) {
			return "" // left (or may have: no answer)
		}
	}
	for _, c := range s.Commits {
		if c.Member == prev.Member && c.Key == prev.Key && c.Epoch == prev.Epoch && c.Release && c.MayHaveLanded() {
			return "" // released (or may have: no answer)
		}
	}
	if lastCall == 0 || g.At.Sub(lastCall) >= p.SessionTimeout {
		return "" // died (or we never saw it talk)
	}
	var notRevoking Time // the last moment the coordinator still showed epoch ≤ prev's
	for _, o := range s.Partitions {
		if o.Key == prev.Key && o.Epoch <= prev.Epoch && o.At < g.At {
			notRevoking = max(notRevoking, o.At)
		}
	}
	if g.At.Sub(notRevoking) >= p.HandoffTimeout {
		return "" // the handoff timed out
	}
	return fmt.Sprintf("%s neither released, left nor died (last call %s) and the revoke started after %s, less than handoff_timeout %v before",
		prev.Member, lastCall, notRevoking, p.HandoffTimeout)
}

// CheckCommittedOffsets: committed offsets never move backwards, and a
// new owner starts at the last committed offset:
//   - the coordinator's committed offset of each partition never falls
//     (nor disappears), across restarts;
//   - of two accepted commits of a partition, one answered before the
//     other was sent, the later never has the lower offset;
//   - a grant of epoch e' starts at or after every offset accepted with an
//     older epoch (those were all accepted before it: once e' is granted,
//     older epochs' commits are refused), and at or before the highest
//     offset that may have landed with an older epoch — or at the log
//     start when nothing was committed.
func CheckCommittedOffsets(s Snapshot, p Params) []Violation {
	var out []Violation
	observed := map[PartitionKey]PartitionState{}
	for _, o := range s.Partitions {
		if last, ok := observed[o.Key]; ok && o.Committed < last.Committed {
			out = append(out, Violation{InvCommittedForward, o.At, fmt.Sprintf("%s: coordinator shows committed %d after %d (at %s)", o.Key, o.Committed, last.Committed, last.At)})
		}
		if last, ok := observed[o.Key]; !ok || o.Committed >= last.Committed {
			observed[o.Key] = o
		}
	}
	byKey := map[PartitionKey][]Commit{}
	for _, c := range s.Commits {
		byKey[c.Key] = append(byKey[c.Key], c)
	}
	for key, commits := range byKey {
		out = append(out, checkCommitOrder(key, commits)...)
	}
	for _, g := range newGrants(s.Grants) {
		if why := startOffsetProblem(byKey[g.Key], g, p.LogStart); why != "" {
			out = append(out, Violation{InvCommittedForward, g.At, fmt.Sprintf("%s: %s (%s) granted epoch %d starting at %d, %s",
				g.Key, g.Member, g.Consumer, g.Epoch, g.Offset, why)})
		}
	}
	return out
}

func checkCommitOrder(key PartitionKey, commits []Commit) []Violation {
	var out []Violation
	for _, later := range commits {
		if later.Offset < 0 {
			// A release without an offset: it commits nothing, and the
			// committed offset stays where it was (group.keepOffset).
			continue
		}
		for _, earlier := range commits {
			if later.Accepted() && earlier.Accepted() && earlier.Done < later.Sent && later.Offset < earlier.Offset {
				out = append(out, Violation{InvCommittedForward, later.Done, fmt.Sprintf(
					"%s: commit of %d by %s@ep%d accepted after commit of %d by %s@ep%d was answered at %s",
					key, later.Offset, later.Member, later.Epoch, earlier.Offset, earlier.Member, earlier.Epoch, earlier.Done)})
				break
			}
		}
	}
	return out
}

func startOffsetProblem(commits []Commit, g Grant, logStart int64) string {
	if g.Offset < 0 {
		return "" // an unresolved offset_reset sentinel
	}
	lower, upper := int64(-1), int64(-1)
	var why []string
	for _, c := range commits {
		if c.Epoch >= g.Epoch {
			continue
		}
		if c.Accepted() {
			lower = max(lower, c.Offset)
		}
		if c.MayHaveLanded() {
			upper = max(upper, c.Offset)
		}
	}
	if upper < 0 {
		upper = logStart
	}
	if g.Offset < lower {
		why = append(why, fmt.Sprintf("below the offset %d committed under an older epoch", lower))
	}
	if g.Offset > upper {
		why = append(why, fmt.Sprintf("beyond the highest offset %d committed (or the log start) under older epochs", upper))
	}
	return strings.Join(why, "; ")
}
