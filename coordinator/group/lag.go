package group

import (
	"slices"
	"time"
)

// The lag rule: a gateway counts live only while it makes progress.
//
// A gateway is safe for a fence when it acknowledged it, left, is safe by
// silence, or — this file — when the fence was appended to the sync log
// more than gateway_timeout ago and gateways fence themselves
// (silent_gateways: fence). Polling alone keeps a gateway from being
// silent, so without this a sync-token holder polling as some gateway id
// with after=0 (each answer a reset, nothing acknowledged) or a fixed
// stale after, or a gateway that cannot apply what it is sent, held every
// revocation of every group until the revoked capabilities expired.
//
// Why it is safe (the argument of silence, with the fence's age in place
// of the last poll's): every answer the machine builds after it appended
// seq S carries S — a delta holds every entry above the poll's after up
// to the current seq, a reset every live fence, deny entry and revoked
// member — so a gateway that applied an answer built after S was
// appended is safe for S. A gateway refuses every fetch once sync_timeout
// passed since it sent the last poll whose answer it applied
// (guard.Follower.Refusal: Acked after Apply and after the fetches the
// update refused finished; an answer it could not apply, or one older
// than its after, does not count). If its last applied answer was built
// before S was appended, that poll was sent before then too, and the
// gateway refuses everything from sync_timeout < gateway_timeout −
// max_clock_skew after it, before S is gateway_timeout old. So once S is
// older than gateway_timeout every gateway applied it or refuses
// everything — whatever its acknowledgements say, and whoever polls under
// its id. Under silent_gateways: serve a gateway that cannot sync keeps
// serving, so the rule is off: a gateway that polls without
// acknowledging holds a fence back until it acknowledges, leaves, or the
// revoked capabilities expire, as a silent one does.
//
// The dates are the machine's clock when the entry was appended, kept by
// the sync log (syncLog.appendedAt, aged: later, never earlier, for the
// seqs compacted away or from before a restore, which count from the
// restore). A handoff waiting in the queue is woken when its fence ages
// past gateway_timeout (the lag timer, armLag).
//
// A gateway whose acknowledgements stay below a seq appended more than
// gateway_timeout ago while it is not silent, and that has been known
// that long, is lagging: shown so by the
// admin gateways view (GatewayLags), reported once per episode to the
// shell (TakeLagging: a WARN, and a count of the gateways the rule made
// safe), the episode ending when it acknowledges everything that old.

// lagState is the machine's side of the lag rule.
type lagState struct {
	armed   bool      // a lag timer is in the heap ...
	at      time.Time // ... firing at at
	notices []LaggingGateway
	dropped int // notices beyond maxLagNotices not kept
	// forgotten are the gateways forgotten for lagging whose bound is
	// still in force (forgetLaggingGateway), oldest first; at most
	// limits.gateways of them.
	forgotten []forgottenGateway
}

// forgottenGateway is a gateway forgotten for lagging: until until (its
// forget plus gateway_timeout) the lag rule's bound holds for every fence
// as if it still polled without acknowledging, and its durable record is
// kept, so a restore brings it back as a known gateway.
type forgottenGateway struct {
	id    string
	until time.Time
}

// maxLagNotices bounds the notices waiting for TakeLagging (one per
// gateway and episode; the gateways are bounded too).
const maxLagNotices = 256

// LaggingGateway reports a gateway that began to lag: it polls (it is not
// silent) but acknowledged only Acked of Seq, and the oldest entry above
// Acked was appended at or before Since, more than gateway_timeout ago.
// SafeByLag: gateways fence themselves (silent_gateways: fence), so it
// counts safe for every fence that old; under serve it does not.
//
// Forgotten: the notice is not of an episode's start but of its end by
// forgetting — the gateway had lagged longer than gateway_timeout and a
// new gateway id took its place in the full table (limits.gateways;
// forgetLaggingGateway).
type LaggingGateway struct {
	Gateway   string
	Acked     uint64
	Seq       uint64
	Since     time.Time
	SafeByLag bool
	Forgotten bool
}

// GatewayLag is the lag of one gateway now: Lagging as in LaggingGateway
// (never when silent: silence says more), and when the oldest sync entry
// it has not acknowledged was appended, or later (zero when it
// acknowledged everything).
type GatewayLag struct {
	Lagging      bool
	UnackedSince time.Time
}

// lagHorizon is the highest seq every gateway is safe for by lag: the
// last one appended more than gateway_timeout ago, 0 under
// silent_gateways: serve.
func (m *Machine) lagHorizon() uint64 {
	if m.cfg.SilentGateways == SilentGatewaysServe {
		return 0
	}
	return m.log.aged(m.now, m.cfg.GatewayTimeout)
}

// safeByLag reports whether every gateway is safe for the entry at seq by
// the lag rule.
func (m *Machine) safeByLag(seq uint64) bool {
	return seq <= m.lagHorizon()
}

// lagging reports whether gw polls but has not acknowledged everything
// appended up to aged (the last seq older than gateway_timeout), though
// it has been known that long: a gateway that just registered (a fresh
// start polls after=0) has had no time to acknowledge. (After a restore
// every gateway counts from the restore: so does every seq before it.)
func (m *Machine) lagging(gw *gateway, aged uint64) bool {
	return gw.acked < aged && !m.silent(gw) && m.now.Sub(gw.registered) > m.cfg.GatewayTimeout
}

// checkLag starts or ends gw's lagging episode; aged is
// m.log.aged(now, gateway_timeout). An episode ends only when gw
// acknowledged everything that old (falling silent does not end it).
func (m *Machine) checkLag(gw *gateway, aged uint64) {
	switch {
	case !gw.lagging && m.lagging(gw, aged):
		gw.lagging = true
		m.noticeLag(LaggingGateway{
			Gateway: gw.id, Acked: gw.acked, Seq: m.log.seq,
			Since:     m.log.appendedAt(gw.acked+1, m.now),
			SafeByLag: m.cfg.SilentGateways != SilentGatewaysServe,
		})
	case gw.lagging && gw.acked >= aged:
		gw.lagging = false
	}
}

// noticeLag keeps n for TakeLagging, or counts it dropped past
// maxLagNotices.
func (m *Machine) noticeLag(n LaggingGateway) {
	if len(m.lag.notices) >= maxLagNotices {
		m.lag.dropped++
		return
	}
	m.lag.notices = append(m.lag.notices, n)
}

// armLag keeps a lag timer armed for when the oldest handoff waiting for
// the gateways ages past gateway_timeout (fence mode only). It may fire
// early (that handoff completed meanwhile); never late.
func (m *Machine) armLag() {
	if m.cfg.SilentGateways == SilentGatewaysServe || m.handoffs.len() == 0 {
		return
	}
	seq := m.handoffs.entries[m.handoffs.head].seq
	at := m.log.appendedAt(seq, m.now).Add(m.cfg.GatewayTimeout + 1) // aged: strictly older
	if !at.After(m.now) || (m.lag.armed && !at.Before(m.lag.at)) {
		return // aged already: released by the watermark, no timer needed
	}
	m.lag.armed, m.lag.at = true, at
	m.push(timer{at: at, kind: timerLag})
}

// onLagTimer: a waiting fence may have aged past gateway_timeout, or the
// bound of a gateway forgotten for lagging may have lifted. Every
// gateway still short of what aged begins its episode, and the handoffs
// it held back advance.
func (m *Machine) onLagTimer(at time.Time) {
	if m.lag.armed && at.Equal(m.lag.at) {
		m.lag.armed = false
	}
	m.expireForgotten()
	aged := m.log.aged(m.now, m.cfg.GatewayTimeout)
	for _, id := range sortedKeys(m.gateways) {
		m.checkLag(m.gateways[id], aged)
	}
	m.releaseHandoffs()
}

// TakeLagging returns the gateways that began to lag since the last call
// (oldest first), and how many more were not kept, and forgets them.
func (m *Machine) TakeLagging() ([]LaggingGateway, int) {
	out, dropped := m.lag.notices, m.lag.dropped
	m.lag.notices, m.lag.dropped = nil, 0
	return out, dropped
}

// GatewayLags is the lag of every gateway now, by id.
func (m *Machine) GatewayLags() map[string]GatewayLag {
	aged := m.log.aged(m.now, m.cfg.GatewayTimeout)
	out := make(map[string]GatewayLag, len(m.gateways))
	for id, gw := range m.gateways {
		l := GatewayLag{Lagging: m.lagging(gw, aged)}
		if gw.acked < m.log.seq {
			l.UnackedSince = m.log.appendedAt(gw.acked+1, m.now)
		}
		out[id] = l
	}
	return out
}

// Forgetting a lagging gateway to make room for a new id (gateways.go).
//
// A sync-token holder, or a fleet of broken gateways, polling under many
// ids without acknowledging is never silent, so without this it fills
// limits.gateways for ever and every real gateway that restarts under a
// new id is refused (409 limit_exceeded): revocations cannot reach it and
// it cannot serve.
//
// It is not safe merely because the lagging gateway refuses fetches now.
// A real gateway's acknowledgement of an answer is its next poll, which
// the machine may not have yet: a gateway that was stuck applying
// nothing, polling on with a stale after (lagging), may just have
// applied an answer to a poll the machine received a moment ago — it is
// in sync again, its sync_timeout counting from that poll, and its next
// poll, with the new after, is on the wire. Forgotten then, it would
// serve the capabilities of a fence appended right after the forget
// while no revocation waits for it (the next poll, answered as a new
// registration, brings the fence, but only when it arrives). Nothing the
// machine sees tells this gateway from one that applies nothing.
//
// What is safe, for every fence present and future: forget the gateway
// and keep the lag rule's bound in force for gateway_timeout from the
// forget (lagBound: no fence is safe before it is gateway_timeout old,
// exactly what the lagging gateway contributed to the watermark while it
// was known, since its acknowledgements stayed below the horizon).
// Every answer any process under its id applied was to a poll received
// before the forget (later polls are a new registration: answered as a
// new gateway's, or refused while the table is full), so it was sent
// before the forget and that process refuses every fetch from
// sync_timeout < gateway_timeout − max_clock_skew after it, unless a
// later answer was applied. Then:
//   - a fence appended before the forget plus gateway_timeout waits
//     until it is gateway_timeout old, and by then each such process
//     applied an answer built after it (which carries it: a delta holds
//     every entry above the poll's after, a reset every live fence — and
//     an answer to a poll after the forget is a registration's, a delta
//     or a reset), or it refuses everything (the lag rule's argument);
//   - a fence appended later is appended when every answer from before
//     the forget has expired (the process refuses everything), and an
//     answer after the forget went to a gateway known again, whose
//     acknowledgement the fence waits for like any other's.
// Across a restart the durable record stands for the bound: it is
// deleted only once the bound lifted (expireForgotten), so a restore
// brings the gateway back as known, seen at the restore with nothing
// acknowledged — a fence then waits for it, its silence or its lag, all
// counted from the restore. Under silent_gateways: serve none of this
// holds (a cut-off gateway keeps serving): nothing is forgotten for
// lagging.
//
// The bound costs nothing while the table is full of gateways that do
// not acknowledge (each holds every fence that long already); after a
// real gateway was forgotten it slows revocations to gateway_timeout for
// gateway_timeout. Which gateway to forget is policy, not safety: only
// one lagging longer than gateway_timeout (a gateway behind for a moment
// is not churned), the one lagging longest, and never one that
// acknowledges what is gateway_timeout old.

// laggingSince is when gw began to lag, for forgetting: the later of its
// registration and the date of the oldest entry it has not acknowledged;
// false when it acknowledged everything or is silent (silence says more).
func (m *Machine) laggingSince(gw *gateway) (time.Time, bool) {
	if gw.acked >= m.log.seq || m.silent(gw) {
		return time.Time{}, false
	}
	return maxTime(m.log.appendedAt(gw.acked+1, m.now), gw.registered), true
}

// forgetLaggingGateway forgets the gateway lagging longest (ties: the
// lowest id) among those lagging for longer than gateway_timeout —
// behind an entry older than twice gateway_timeout, and known that long
// — and puts the lag rule's bound in force for it; false when there is
// none, under silent_gateways: serve, or while limits.gateways forgotten
// gateways' bounds are in force already.
func (m *Machine) forgetLaggingGateway() bool {
	if m.cfg.SilentGateways == SilentGatewaysServe || len(m.lag.forgotten) >= m.cfg.Limits.Gateways {
		return false
	}
	var oldest *gateway
	var oldestSince time.Time
	for _, gw := range m.gateways {
		since, ok := m.laggingSince(gw)
		if !ok || m.now.Sub(since) <= 2*m.cfg.GatewayTimeout {
			continue
		}
		if oldest == nil || since.Before(oldestSince) || (since.Equal(oldestSince) && gw.id < oldest.id) {
			oldest, oldestSince = gw, since
		}
	}
	if oldest == nil {
		return false
	}
	until := m.now.Add(m.cfg.GatewayTimeout)
	m.lag.forgotten = append(m.lag.forgotten, forgottenGateway{id: oldest.id, until: until})
	m.push(timer{at: until.Add(1), kind: timerLag})
	m.noticeLag(LaggingGateway{Gateway: oldest.id, Acked: oldest.acked, Seq: m.log.seq, Since: oldestSince,
		SafeByLag: true, Forgotten: true})
	m.dropGateway(oldest) // its record stays until the bound lifts
	return true
}

// lagBound reports whether a gateway forgotten for lagging holds every
// fence to the lag rule's bound now: gateway_timeout since its forget
// has not passed.
func (m *Machine) lagBound() bool {
	n := len(m.lag.forgotten)
	return n > 0 && !m.now.After(m.lag.forgotten[n-1].until)
}

// expireForgotten lifts the bounds that passed and deletes those
// gateways' records, unless one registered again meanwhile (its record
// is a known gateway's then).
func (m *Machine) expireForgotten() {
	n := 0
	for ; n < len(m.lag.forgotten) && m.now.After(m.lag.forgotten[n].until); n++ {
		if id := m.lag.forgotten[n].id; m.gateways[id] == nil {
			m.putRecord(recordKey{kind: keyGateway, first: id}, GatewayRecord{ID: id, Deleted: true})
		}
	}
	if n > 0 {
		m.lag.forgotten = slices.Delete(m.lag.forgotten, 0, n)
		m.watermarkValid = false
	}
}
