package group

import (
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/capgate/capgate/api"
)

// entryKind is what a sync log entry carries.
type entryKind uint8

const (
	entryFence entryKind = iota
	entryDenied
	entryRevoked
	entryQoS
	entryKeys
)

type syncEntry struct {
	seq     uint64
	at      time.Time // when it was appended (never before an earlier entry's at)
	kind    entryKind
	fence   api.Fence
	denied  api.Denied
	revoked api.RevokedMember
	qos     *api.QoSOverride
}

// syncLog is the bounded log of updates for gateways: a ring of the last
// max entries, numbered consecutively up to seq.
//
// It also dates every seq, for the lag rule (lag.go): when it was
// appended, or a later time (never an earlier one). The ring's entries
// carry their own time; the seqs compacted away are dated coarsely by
// marks (every seq above the previous mark's, up to a mark's seq, was
// appended at or before its at), at most maxMarks of them; the seqs up to
// floor.seq — the ones before the log started, after a restore too — by
// floor.at, the first time the log saw the clock after init.
type syncLog struct {
	buf  []syncEntry
	head int // index of the oldest entry
	n    int
	max  int
	seq  uint64 // highest seq handed out

	floor  stamp
	marks  []stamp // ascending seq and at; the last one's seq is first()-1
	dated  bool    // floor.at is set
	lastAt time.Time
}

// stamp dates the seqs up to seq: appended at or before at (and, for a
// mark, the first of them at or after from).
type stamp struct {
	seq      uint64
	at, from time.Time
}

// maxMarks bounds the marks dating compacted seqs; markSlots is how many
// a gateway_timeout is cut into (a mark spans less than
// gateway_timeout/markSlots of appends).
const (
	maxMarks  = 64
	markSlots = 32
)

func (l *syncLog) init(max int, seq uint64) {
	l.max = max
	l.seq = seq
	l.buf = l.buf[:0]
	l.head, l.n = 0, 0
	l.floor, l.marks, l.dated, l.lastAt = stamp{seq: seq}, l.marks[:0], false, time.Time{}
}

// date gives the seqs before the log started the first time the log sees
// (now): after a restore, no earlier than the restore, so the lag rule
// counts gateway_timeout for them from there.
func (l *syncLog) date(now time.Time) {
	if !l.dated {
		l.floor.at, l.dated = now, true
		l.lastAt = maxTime(l.lastAt, now)
	}
}

// first is the seq of the oldest retained entry (seq+1 when empty).
func (l *syncLog) first() uint64 {
	return l.seq - uint64(l.n) + 1
}

// append adds e, appended at now; width is how long one mark may span
// (gateway_timeout/markSlots).
func (l *syncLog) append(e syncEntry, now time.Time, width time.Duration) uint64 {
	l.date(now)
	l.lastAt = maxTime(l.lastAt, now)
	l.seq++
	e.seq, e.at = l.seq, l.lastAt
	if l.n < l.max {
		if len(l.buf) < l.max {
			l.buf = append(l.buf, e)
		} else {
			l.buf[(l.head+l.n)%l.max] = e
		}
		l.n++
		return l.seq
	}
	l.compacted(l.buf[l.head], width)
	l.buf[l.head] = e
	l.head = (l.head + 1) % l.max
	return l.seq
}

// compacted dates an entry leaving the ring by the marks: it joins the
// last mark when appended within width of that mark's first entry (the
// mark's date becomes its own: never earlier than any of them), else
// starts a mark of its own. Marks that aged fold into the floor (aged),
// so about d/width+2 marks date the last d; should more than maxMarks
// pile up all the same (no lag query folded them), the two marks closest
// in time merge into the later one. A merge only dates some seqs later,
// never earlier; it is never into the floor, which would date every
// older seq as late as the merged mark.
func (l *syncLog) compacted(e syncEntry, width time.Duration) {
	if n := len(l.marks); n > 0 && e.at.Sub(l.marks[n-1].from) < width {
		l.marks[n-1].seq, l.marks[n-1].at = e.seq, e.at
		return
	}
	l.marks = append(l.marks, stamp{seq: e.seq, at: e.at, from: e.at})
	if len(l.marks) <= maxMarks {
		return
	}
	best := 0 // ties: the newest pair, so the oldest marks keep their dates and age
	for i := 1; i+1 < len(l.marks); i++ {
		if l.marks[i+1].at.Sub(l.marks[i].at) <= l.marks[best+1].at.Sub(l.marks[best].at) {
			best = i
		}
	}
	l.marks[best+1].from = l.marks[best].from
	l.marks = slices.Delete(l.marks, best, best+1) // its seqs now dated by the next mark
}

// appendedAt is when seq (at most l.seq) was appended, or later.
func (l *syncLog) appendedAt(seq uint64, now time.Time) time.Time {
	l.date(now)
	switch {
	case seq <= l.floor.seq:
		return l.floor.at
	case seq < l.first():
		i := sort.Search(len(l.marks), func(i int) bool { return l.marks[i].seq >= seq })
		return l.marks[i].at
	case seq <= l.seq:
		return l.buf[(l.head+int(seq-l.first()))%len(l.buf)].at
	}
	return l.lastAt
}

// aged is the highest seq appended more than d before now, as far as the
// dates tell (0: none). The marks it finds aged fold into the floor: what
// is that old needs no finer date (the machine's now and d only grow
// older together), and the marks left date the last d finely.
func (l *syncLog) aged(now time.Time, d time.Duration) uint64 {
	l.date(now)
	cutoff := now.Add(-d)
	if !l.floor.at.Before(cutoff) {
		return 0
	}
	i := 0
	for i < len(l.marks) && l.marks[i].at.Before(cutoff) {
		i++
	}
	if i > 0 {
		l.floor = l.marks[i-1]
		l.marks = slices.Delete(l.marks, 0, i)
	}
	h := l.floor.seq
	if len(l.marks) > 0 {
		return h // the next mark is not aged: neither is the ring
	}
	k := sort.Search(l.n, func(i int) bool { return !l.buf[(l.head+i)%len(l.buf)].at.Before(cutoff) })
	if k > 0 {
		h = l.first() + uint64(k) - 1
	}
	return h
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// covers reports whether a delta after `after` can be built from the log.
func (l *syncLog) covers(after uint64) bool {
	return after != 0 && after+1 >= l.first() && after <= l.seq
}

// each calls f for every entry after `after`, oldest first.
func (l *syncLog) each(after uint64, f func(*syncEntry)) {
	skip := int(after + 1 - l.first())
	for i := skip; i < l.n; i++ {
		f(&l.buf[(l.head+i)%len(l.buf)])
	}
}

// appendEntry adds an update for the gateways.
func (m *Machine) appendEntry(e syncEntry) uint64 {
	m.logGrew = true
	m.seqDirty = true
	return m.log.append(e, m.now, m.cfg.GatewayTimeout/markSlots)
}

// handoffQueue holds revoking partitions in fence-seq order, waiting for
// the gateway watermark to pass their fence. Entries whose partition has
// since moved on are skipped.
type handoffQueue struct {
	entries []queuedHandoff
	head    int
}

type queuedHandoff struct {
	seq       uint64
	partition *partition
}

func (q *handoffQueue) push(seq uint64, p *partition) {
	q.entries = append(q.entries, queuedHandoff{seq, p})
}

// popUpTo removes and returns the entries with seq <= w.
func (q *handoffQueue) popUpTo(w uint64, f func(*partition, uint64)) {
	for q.head < len(q.entries) && q.entries[q.head].seq <= w {
		e := q.entries[q.head]
		q.entries[q.head] = queuedHandoff{}
		q.head++
		f(e.partition, e.seq)
	}
	if q.head > 1024 && q.head*2 > len(q.entries) {
		q.entries = slices.Delete(q.entries, 0, q.head)
		q.head = 0
	}
}

func (q *handoffQueue) len() int { return len(q.entries) - q.head }

// silent reports whether gw has been silent longer than gateway_timeout.
func (m *Machine) silent(gw *gateway) bool {
	return m.now.Sub(gw.lastSeen) > m.cfg.GatewayTimeout
}

// safeBySilence reports whether gw's silence makes it safe for every
// fence: it has been silent longer than gateway_timeout and gateways fence
// themselves when they cannot sync. Gateways that keep serving
// (silent_gateways: serve) are never safe by silence; their fences wait
// for an ack, a leave, or the revoked capabilities' expiry (holderExpired).
// A gateway that polls without acknowledging is the lag rule's (lag.go).
func (m *Machine) safeBySilence(gw *gateway) bool {
	return m.cfg.SilentGateways != SilentGatewaysServe && m.silent(gw)
}

// gatewayWatermark is the highest seq every gateway is safe for by ack,
// silence or lag (MaxUint64 with no gateways), and no higher than the lag
// horizon while the bound of a gateway forgotten for lagging is in force. It also keeps the lag
// timer armed for the oldest handoff waiting (armLag).
func (m *Machine) gatewayWatermark() uint64 {
	m.armLag()
	if m.watermarkValid {
		return m.watermark
	}
	w := uint64(math.MaxUint64)
	horizon := m.lagHorizon()
	if m.lagBound() { // a gateway forgotten for lagging (lag.go)
		w = horizon
	}
	for _, gw := range m.gateways {
		if !m.safeBySilence(gw) && max(gw.acked, horizon) < w {
			w = max(gw.acked, horizon)
		}
	}
	m.watermark, m.watermarkValid = w, true
	return w
}

// releaseHandoffs advances every handoff the watermark now covers.
func (m *Machine) releaseHandoffs() {
	m.watermarkValid = false
	w := m.gatewayWatermark()
	m.handoffs.popUpTo(w, func(p *partition, seq uint64) {
		if r := p.revocation(); r != nil && r.fenceSeq == seq {
			m.tryComplete(p)
		}
	})
	m.armLag()
}

func (m *Machine) syncPoll(e SyncPoll) {
	if e.Gateway == "" {
		m.reject(e.Ref, api.CodeBadRequest, "sync: gateway id required")
		return
	}
	gw, ok := m.claimGateway(e.Ref, e.Gateway, e.Instance)
	if !ok {
		return
	}
	if gw == nil {
		if gw = m.registerGateway(e.Ref, e.Gateway); gw == nil {
			return
		}
		gw.instance = e.Instance
	}
	gw.lastSeen = m.now
	m.armSilence(gw)
	if gw.wait.held {
		m.answerPoll(gw)
	}
	covered := m.log.covers(e.After)
	if covered && e.After > gw.acked {
		gw.acked = e.After
	}
	m.checkLag(gw, m.log.aged(m.now, m.cfg.GatewayTimeout))
	m.releaseHandoffs()
	switch {
	case !covered:
		m.send(m.resetReply(e.Ref, gw.id))
	case e.After < m.log.seq:
		m.send(m.deltaReply(e.Ref, gw.id, e.After))
	default:
		wait := e.Wait
		if wait <= 0 || wait > m.cfg.SyncWaitMax {
			wait = m.cfg.SyncWaitMax
		}
		gw.parkedAfter = e.After
		if gw.wait.park(e.Ref, m.now.Add(wait)) {
			m.push(timer{at: gw.wait.until, kind: timerSyncWait, gateway: gw})
		}
	}
}

// gatewayLeave forgets a gateway that stopped serving (GatewayLeave).
func (m *Machine) gatewayLeave(e GatewayLeave) {
	if e.Gateway == "" {
		m.reject(e.Ref, api.CodeBadRequest, "sync: gateway id required")
		return
	}
	if gw := m.gateways[e.Gateway]; gw != nil {
		if m.foreignInstance(gw, e.Instance) {
			m.conflictRejection(e.Ref, gw)
			return
		}
		m.forgetGateway(gw)
	}
	m.send(Done{Ref: e.Ref})
}

func (m *Machine) armSilence(gw *gateway) {
	if !gw.silenceArmed {
		gw.silenceArmed = true
		// Silent means strictly longer than gateway_timeout.
		m.push(timer{at: gw.lastSeen.Add(m.cfg.GatewayTimeout + 1), kind: timerSilence, gateway: gw})
	}
}

func (m *Machine) onSilenceTimer(gw *gateway) {
	gw.silenceArmed = false
	if gw.left {
		return
	}
	if m.silent(gw) {
		if m.safeBySilence(gw) {
			m.releaseHandoffs()
		}
		return
	}
	m.armSilence(gw)
}

func (m *Machine) onSyncWaitTimer(gw *gateway) {
	if gw.left {
		return
	}
	switch due, rearm := gw.wait.fire(m.now); {
	case rearm:
		m.push(timer{at: gw.wait.until, kind: timerSyncWait, gateway: gw})
	case due:
		m.answerPoll(gw)
	}
}

// answerPoll replies to gw's held poll with whatever is newer than it.
func (m *Machine) answerPoll(gw *gateway) {
	m.answerPollFrom(gw, nil)
}

// answerPollFrom is answerPoll with the deltas already built for other
// gateways' polls in this step (nil: none kept), by the seq they start
// after.
func (m *Machine) answerPollFrom(gw *gateway, built map[uint64]SyncReply) {
	gw.wait.held = false
	if !m.log.covers(gw.parkedAfter) {
		m.send(m.resetReply(gw.wait.ref, gw.id))
		return
	}
	r, ok := built[gw.parkedAfter]
	if !ok {
		r = m.deltaReply(0, "", gw.parkedAfter)
		if built != nil {
			built[gw.parkedAfter] = r
		}
	}
	r.Ref, r.Gateway = gw.wait.ref, gw.id
	m.send(r)
}

// answerParkedPolls answers every held poll after the log grew. The
// gateways' polls are held from the same seq as a rule (each polls again
// once it applied the last answer), so they get the same delta: it is
// built once and its slices shared by their replies, which nobody writes
// to (the shell encodes them, once: coordinator/syncshare.go). A revoke
// of a member holding 10,000 partitions with 16 gateways built 16 copies
// of its 10,000 fences in the loop, before the persist (BENCHMARKS §3).
func (m *Machine) answerParkedPolls() {
	var parked []*gateway
	for _, gw := range m.gateways {
		if gw.wait.held && gw.parkedAfter < m.log.seq {
			parked = append(parked, gw)
		}
	}
	slices.SortFunc(parked, func(a, b *gateway) int { return strings.Compare(a.id, b.id) })
	built := make(map[uint64]SyncReply, 1)
	for _, gw := range parked {
		m.answerPollFrom(gw, built)
	}
}

// deltaReply is the entries after `after`, each list sized at once.
func (m *Machine) deltaReply(ref Ref, gatewayID string, after uint64) SyncReply {
	r := SyncReply{Ref: ref, Gateway: gatewayID, Seq: m.log.seq}
	var n [entryKeys + 1]int
	m.log.each(after, func(e *syncEntry) { n[e.kind]++ })
	r.Fences = room(r.Fences, n[entryFence])
	r.Denied = room(r.Denied, n[entryDenied])
	r.RevokedMembers = room(r.RevokedMembers, n[entryRevoked])
	r.QoS = room(r.QoS, n[entryQoS])
	m.log.each(after, func(e *syncEntry) {
		switch e.kind {
		case entryFence:
			r.Fences = append(r.Fences, e.fence)
		case entryDenied:
			r.Denied = append(r.Denied, e.denied)
		case entryRevoked:
			r.RevokedMembers = append(r.RevokedMembers, e.revoked)
		case entryQoS:
			r.QoS = append(r.QoS, *e.qos)
		case entryKeys:
			r.KeysChanged = true
		}
	})
	return r
}

// room is an empty list with room for n (nil for none, as before: a
// reply's empty lists are absent).
func room[T any](list []T, n int) []T {
	if n == 0 {
		return list
	}
	return make([]T, 0, n)
}

// resetReply is a full snapshot: one fence per partition with an epoch,
// and every live deny entry, revoked member and QoS override, sorted.
func (m *Machine) resetReply(ref Ref, gatewayID string) SyncReply {
	r := SyncReply{Ref: ref, Gateway: gatewayID, Seq: m.log.seq, Reset: true, KeysChanged: true}
	for _, name := range sortedKeys(m.groups) {
		for _, p := range m.groups[name].order {
			if p.epoch > 0 {
				r.Fences = append(r.Fences, p.fence())
			}
		}
	}
	r.Denied, r.RevokedMembers = m.revocations.Denied(), m.revocations.Members()
	for _, o := range m.qos {
		r.QoS = append(r.QoS, o)
	}
	slices.SortFunc(r.QoS, func(a, b api.QoSOverride) int { return strings.Compare(a.ID, b.ID) })
	return r
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
