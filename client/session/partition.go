package session

import (
	"slices"
	"time"

	"github.com/capgate/capgate/api"
)

// State is a held partition's state. A released partition is no longer
// held: it leaves the session (its epoch stays in seen).
type State uint8

// Partition states.
const (
	// Fetching: reading with capability+epoch from next.
	Fetching State = iota + 1
	// Revoking: no new fetch; waiting for the in-flight fetch, the revoke
	// hook, in-flight commits and the user's acknowledgement, then
	// committing with the old capability and releasing.
	Revoking
)

func (s State) String() string {
	switch s {
	case Fetching:
		return "fetching"
	case Revoking:
		return "revoking"
	}
	return "state(?)"
}

// partition is one held partition at one epoch. A re-grant under a higher
// epoch replaces the object, so results addressed to the old one (by
// fetch id or commit) cannot touch the new one.
type partition struct {
	id         Partition
	state      State
	epoch      uint64
	capability string
	expiresAt  time.Time // zero: unknown, never paused for expiry
	renewedAt  time.Time // when the current capability arrived

	next      int64 // offset of the next fetch
	delivered int64 // offset after the last record handed to the user
	processed int64 // offset after the last record the user processed
	committed int64 // highest offset the coordinator accepted

	fetch uint64 // in-flight fetch id, 0 when none
	// refused: the gateway refused the capability (401/403/404...): no
	// fetch until a new capability arrives.
	refused bool
	commits int // commits in flight naming this partition

	// inHand: the latest Polled handed records of p to the user, and the
	// user has not come back since (the next Polled, a commit of
	// everything, Close): it may still be processing them.
	inHand bool

	revokedAt time.Time
	hook      uint64 // revoke hook not yet returned, 0 when none
	releasing bool   // the release commit is in flight
	// releaseAlone: a release of several partitions was refused and this
	// one goes again in a release of its own (commitDone), when
	// releaseReady has room (MaxReleasesInFlight).
	releaseAlone bool
}

// waitsForUser reports whether revoked p still waits for the user to be
// done with records Poll handed it: not everything delivered is processed
// and — with ManualMarks, where coming back marks nothing — the user has
// not come back since the latest Polled handed it records of p. Without
// ManualMarks coming back marks everything delivered, so the offsets
// alone tell.
func (s *Session) waitsForUser(p *partition) bool {
	if p.processed == p.delivered {
		return false
	}
	return !s.cfg.ManualMarks || p.inHand
}

// expiring reports whether the capability is too close to its expiry to
// start a fetch with.
func (p *partition) expiring(now time.Time, margin time.Duration) bool {
	return !p.expiresAt.IsZero() && !now.Before(p.expiresAt.Add(-margin))
}

func (s *Session) joined(e Joined) {
	switch s.status {
	case Idle, Rejoining, Active:
	default:
		return // closing or stopped: the shell will leave or has left
	}
	s.status = Active
	s.member = Member{
		ID:          e.Response.MemberID,
		Token:       e.Response.MemberToken,
		Incarnation: s.member.Incarnation + 1,
	}
	s.heartbeatWait = time.Duration(e.Response.HeartbeatWaitMs) * time.Millisecond
	s.lastTimedCommit = e.Now
	s.applyGrants(e.Now, e.Response.Grants)
}

// memberRenewed adopts the member token of a rejoin of this member.
func (s *Session) memberRenewed(e MemberRenewed) {
	if s.status != Active || e.Response.MemberID != s.member.ID {
		return
	}
	s.member.Token = e.Response.MemberToken
	s.applyGrants(e.Now, e.Response.Grants)
}

func (s *Session) news(e NewsArrived) {
	if e.Incarnation != s.member.Incarnation || (s.status != Active && s.status != Closing) {
		return
	}
	var revoked []Partition
	for _, ref := range e.News.Revoke {
		if s.applyRevoke(e.Now, ref) {
			revoked = append(revoked, Partition{ref.Topic, ref.Partition})
		}
	}
	s.callRevoke(revoked)
	if s.status == Closing {
		s.applyRenewals(e.Now, e.News.Grants, e.News.Renew)
		return
	}
	grants := append(slices.Clip(e.News.Grants), e.News.Renew...)
	s.applyGrants(e.Now, grants)
}

// applyRenewals takes only same-epoch capabilities (while closing, nothing
// new is accepted).
func (s *Session) applyRenewals(now time.Time, lists ...[]api.Grant) {
	for _, list := range lists {
		for _, g := range list {
			if p := s.parts[Partition{g.Topic, g.Partition}]; p != nil && p.epoch == g.Epoch {
				s.renew(now, p, g)
			}
		}
	}
}

// applyGrants applies grants and renewals alike: the same epoch as held
// replaces the capability only; a higher epoch (or a partition not held
// and never seen at that epoch) replaces everything; a lower one is
// ignored. New partitions are announced in one CallGrant.
func (s *Session) applyGrants(now time.Time, grants []api.Grant) {
	var granted []Partition
	for _, g := range grants {
		id := Partition{g.Topic, g.Partition}
		p := s.parts[id]
		switch {
		case p != nil && g.Epoch == p.epoch:
			s.renew(now, p, g)
		case p != nil && g.Epoch < p.epoch:
		case p == nil && s.stale(id, g.Epoch):
			if g.Epoch == s.seen[id] {
				s.releaseAgain(g)
			}
		default:
			s.grant(now, p, g)
			granted = append(granted, id)
		}
	}
	if len(granted) > 0 {
		slices.SortFunc(granted, comparePartitions)
		s.emit(CallGrant{Partitions: slices.Compact(granted)})
	}
}

// releaseAgain answers a renewal of an epoch this session already gave
// up: the coordinator still counts the partition as ours, so the release
// was lost or refused (its capability denied). The renewal's fresh
// capability carries a release without an offset (the next holder starts
// at the last committed one); the coordinator then moves the partition.
func (s *Session) releaseAgain(g api.Grant) {
	p := &partition{
		id: Partition{g.Topic, g.Partition}, epoch: g.Epoch, capability: g.Capability,
		processed: -1, committed: -1, state: Revoking,
	}
	s.sendCommit(0, []*partition{p}, true)
}

func (s *Session) stale(id Partition, epoch uint64) bool {
	seen, ok := s.seen[id]
	return ok && epoch <= seen
}

// renew replaces the capability of the same epoch; offsets are untouched.
func (s *Session) renew(now time.Time, p *partition, g api.Grant) {
	p.capability = g.Capability
	p.expiresAt = parseExpiry(g.ExpiresAt)
	p.renewedAt = now
	p.refused = false
}

// grant installs a fresh partition object at g's epoch and offset,
// detaching old (if any): its fetch is cancelled and its batches dropped.
func (s *Session) grant(now time.Time, old *partition, g api.Grant) {
	id := Partition{g.Topic, g.Partition}
	if old != nil {
		s.detach(old)
	}
	start := s.startOffset(g)
	s.parts[id] = &partition{
		id:         id,
		state:      Fetching,
		epoch:      g.Epoch,
		capability: g.Capability,
		expiresAt:  parseExpiry(g.ExpiresAt),
		renewedAt:  now,
		next:       start,
		delivered:  start,
		processed:  start,
		committed:  start,
	}
	s.seen[id] = max(s.seen[id], g.Epoch)
}

// The start policies of Config.OffsetReset, named as api.Grant.OffsetReset
// names the group's.
const (
	OffsetResetEarliest = "earliest"
	OffsetResetLatest   = "latest"
)

// startOffset is where a granted partition starts: the grant's offset,
// unless the group has nothing committed for it (g.OffsetReset names the
// group's policy) and this consumer asked for another policy; then Kafka's
// sentinel for it (-2 earliest, -1 latest), which the gateway resolves at
// the first fetch. A committed offset always wins, as with Kafka's
// auto.offset.reset.
func (s *Session) startOffset(g api.Grant) int64 {
	if g.OffsetReset == "" || s.cfg.OffsetReset == "" || s.cfg.OffsetReset == g.OffsetReset {
		return g.Offset
	}
	if s.cfg.OffsetReset == OffsetResetLatest {
		return -1
	}
	return -2
}

// detach stops everything in flight for p and takes it out of the session.
func (s *Session) detach(p *partition) {
	if p.fetch != 0 {
		s.emit(CancelFetch{ID: p.fetch, Partition: p.id})
		p.fetch = 0
	}
	s.purge(p.id)
	if s.parts[p.id] == p {
		if p.state == Revoking {
			s.revoking--
		}
		delete(s.parts, p.id)
	}
}

// applyRevoke starts revoking the partition if ref names its epoch or a
// later one; it reports whether it did.
func (s *Session) applyRevoke(now time.Time, ref api.PartitionRef) bool {
	p := s.parts[Partition{ref.Topic, ref.Partition}]
	if p == nil || p.state != Fetching || ref.Epoch < p.epoch {
		return false
	}
	s.startRevoke(now, p)
	return true
}

// startRevoke stops fetching p at once: the in-flight fetch is cancelled,
// undelivered batches are dropped, so nothing more of p reaches the user.
// The caller emits the hook call (callRevoke) for the whole batch.
func (s *Session) startRevoke(now time.Time, p *partition) {
	p.state = Revoking
	s.revoking++
	p.revokedAt = now
	if p.fetch != 0 {
		s.emit(CancelFetch{ID: p.fetch, Partition: p.id})
	}
	s.purge(p.id)
}

// callRevoke emits one hook call for partitions whose revoke just started.
func (s *Session) callRevoke(ids []Partition) {
	if len(ids) == 0 {
		return
	}
	id := s.nextID()
	for _, pid := range ids {
		s.parts[pid].hook = id
	}
	slices.SortFunc(ids, comparePartitions)
	s.emit(CallRevoke{ID: id, Partitions: ids})
}

func (s *Session) hookDone(e HookDone) {
	for _, p := range s.parts {
		if p.hook == e.ID {
			p.hook = 0
		}
	}
}

// heartbeatFailed loses everything on a rejoin code of this incarnation,
// or when its member token expired (token_expired: no heartbeat, commit or
// leave of this member can succeed any more; the member token never
// outlives the credential, so a join with the shell's current credential
// is the only way on).
func (s *Session) heartbeatFailed(e HeartbeatFailed) {
	if e.Incarnation == s.member.Incarnation && (api.NeedsRejoin(e.Code) || e.Code == api.CodeTokenExpired) {
		s.lost()
	}
}

// lost drops every partition without committing (the member is gone, its
// commits would be refused), tells the user, and rejoins, unless the
// session is closing, in which case it stops. While Leaving it changes
// nothing: every partition is gone already, and the leave itself makes
// the coordinator answer the held heartbeat unknown_member, racing the
// leave's own answer; that answer (LeaveDone) ends the session.
func (s *Session) lost() {
	switch s.status {
	case Active, Closing:
	default:
		return
	}
	ids := make([]Partition, 0, len(s.parts))
	for _, p := range s.parts {
		ids = append(ids, p.id)
		s.detach(p)
	}
	if len(ids) > 0 {
		slices.SortFunc(ids, comparePartitions)
		s.emit(CallRevoke{Partitions: ids, Lost: true})
	}
	if s.status == Active || s.renewing {
		s.rejoin()
		return
	}
	s.stop()
}

// rejoin asks for a fresh join (as a new member).
func (s *Session) rejoin() {
	s.status, s.renewing = Rejoining, false
	s.emit(Rejoin{})
}

func (s *Session) closeRequested(e CloseRequested) {
	switch s.status {
	case Active:
	case Idle, Rejoining:
		s.stop()
		return
	case Closing, Leaving:
		s.renewing = false // a renewal under way ends as a close
		return
	default:
		return
	}
	s.status = Closing
	s.userReturned()
	s.revokeAll(e.Now)
}

// renewRequested revokes every held partition as the coordinator's
// revoke would (no userReturned: records the user holds are waited for),
// then leaves and rejoins (advance, leaveDone).
func (s *Session) renewRequested(e RenewRequested) {
	if s.status != Active {
		return
	}
	s.status, s.renewing = Closing, true
	s.revokeAll(e.Now)
}

// revokeAll starts revoking every fetching partition, in one hook call.
func (s *Session) revokeAll(now time.Time) {
	var revoked []Partition
	for _, p := range s.parts {
		if p.state == Fetching {
			s.startRevoke(now, p)
			revoked = append(revoked, p.id)
		}
	}
	s.callRevoke(revoked)
}

func (s *Session) leaveDone() {
	switch {
	case s.status == Leaving && s.renewing:
		s.rejoin()
	case s.status == Leaving:
		s.stop()
	}
}

func (s *Session) stop() {
	for _, p := range s.parts {
		s.detach(p)
	}
	s.status = Stopped
	s.emit(Stop{})
}

// parseExpiry reads an RFC 3339 expiry; an unreadable one is unknown.
func parseExpiry(v string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}
	}
	return t
}
