package group

import "time"

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
}

// maxLagNotices bounds the notices waiting for TakeLagging (one per
// gateway and episode; the gateways are bounded too).
const maxLagNotices = 256

// LaggingGateway reports a gateway that began to lag: it polls (it is not
// silent) but acknowledged only Acked of Seq, and the oldest entry above
// Acked was appended at or before Since, more than gateway_timeout ago.
// SafeByLag: gateways fence themselves (silent_gateways: fence), so it
// counts safe for every fence that old; under serve it does not.
type LaggingGateway struct {
	Gateway   string
	Acked     uint64
	Seq       uint64
	Since     time.Time
	SafeByLag bool
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
		if len(m.lag.notices) >= maxLagNotices {
			m.lag.dropped++
			return
		}
		m.lag.notices = append(m.lag.notices, LaggingGateway{
			Gateway: gw.id, Acked: gw.acked, Seq: m.log.seq,
			Since:     m.log.appendedAt(gw.acked+1, m.now),
			SafeByLag: m.cfg.SilentGateways != SilentGatewaysServe,
		})
	case gw.lagging && gw.acked >= aged:
		gw.lagging = false
	}
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

// onLagTimer: a waiting fence may have aged past gateway_timeout. Every
// gateway still short of what aged begins its episode, and the handoffs
// it held back advance.
func (m *Machine) onLagTimer(at time.Time) {
	if m.lag.armed && at.Equal(m.lag.at) {
		m.lag.armed = false
	}
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
