package group

// The gateways the machine knows are bounded (limits.gateways). Every
// known gateway holds a revocation back until it acknowledges the fence,
// is safe by silence or by lag, leaves, or the revoked capabilities
// expire, so the table is what a sync-token holder naming fresh ids (or a
// fleet restarting under random ids) could otherwise grow without end.
//
//   - A known gateway is never refused: its acknowledgements decide
//     safety, and refusing its polls would only hold revocations back.
//   - A new id past the bound first makes room by forgetting the gateway
//     silent longest, but only one whose silence already makes it safe
//     for every fence (silent_gateways: fence, silent longer than
//     gateway_timeout): the watermark ignores it already, so forgetting
//     it acknowledges nothing on its behalf. If it polls again it is
//     registered as new and catches up from its own after (a delta or a
//     reset), as after a leave — and it has refused fetches since its
//     sync_timeout, which is shorter than gateway_timeout.
//   - Failing that, it forgets the gateway lagging longest, if one has
//     lagged (polled without acknowledging what the lag rule already
//     counts it safe for) for longer than gateway_timeout, again only
//     under silent_gateways: fence: lag.go, forgetLaggingGateway, says
//     why that is safe only with the lag rule's bound kept in force for
//     gateway_timeout after the forget (and the durable record kept as
//     long). A gateway that acknowledges what is that old is never
//     forgotten.
//   - Otherwise the new id is refused (409 limit_exceeded naming
//     limits.gateways) and nothing changes: no record, no ack, no held
//     poll answered. With silent_gateways: serve a silent or lagging
//     gateway is never forgotten by the machine (it may still serve the
//     revoked capabilities); a gateway known dead is removed with a sync
//     leave on its behalf (POST /v1/sync/leave).
//
// After a restore the table may hold more than the bound (the setting
// was lowered, or gateways forgotten for lagging came back with their
// records): every restored gateway stays known.

import (
	"time"

	"github.com/capgate/capgate/api"
)

// registerGateway admits a new gateway id, or answers the refusal to ref
// and returns nil.
func (m *Machine) registerGateway(ref Ref, id string) *gateway {
	if max := m.cfg.Limits.Gateways; len(m.gateways) >= max && !m.forgetSilentGateway() && !m.forgetLaggingGateway() {
		m.limitRejection(ref, "gateways", int64(max),
			"sync: the coordinator knows %d gateways and none is silent or lagging long enough to forget; a gateway that stopped should leave (POST /v1/sync/leave)", len(m.gateways))
		return nil
	}
	gw := &gateway{id: id, registered: m.now}
	m.gateways[id] = gw
	m.putRecord(recordKey{kind: keyGateway, first: id}, GatewayRecord{ID: id})
	return gw
}

// forgetSilentGateway forgets the gateway silent longest (ties: the
// lowest id) among those safe by silence; false when there is none.
func (m *Machine) forgetSilentGateway() bool {
	var oldest *gateway
	for _, gw := range m.gateways {
		if !m.safeBySilence(gw) {
			continue
		}
		if oldest == nil || gw.lastSeen.Before(oldest.lastSeen) ||
			(gw.lastSeen.Equal(oldest.lastSeen) && gw.id < oldest.id) {
			oldest = gw
		}
	}
	if oldest == nil {
		return false
	}
	m.forgetGateway(oldest)
	return true
}

// forgetGateway deletes gw (it left, or silence made room for another)
// and its durable record.
func (m *Machine) forgetGateway(gw *gateway) {
	m.dropGateway(gw)
	m.putRecord(recordKey{kind: keyGateway, first: gw.id}, GatewayRecord{ID: gw.id, Deleted: true})
}

// dropGateway removes gw from the table: its held poll is answered, its
// timers are ignored from now on, and the handoffs it alone held back
// advance. Its record is the caller's.
func (m *Machine) dropGateway(gw *gateway) {
	if gw.wait.held {
		m.answerPoll(gw)
	}
	gw.left = true
	delete(m.gateways, gw.id)
	m.releaseHandoffs()
}

// One gateway id, one process. Acknowledgements and leaves are counted
// per gateway id, so two processes polling under one id (a Deployment
// of two replicas from one config) would let one's ack or leave stand
// for the other, which may still serve a revoked capability. Each
// gateway process sends a nonce drawn at start (the instance); the
// gateway record remembers the instance that holds the id.
//
//   - A poll from the holder, or with no nonce (a gateway from before
//     nonces: as before, it cannot be told apart), proceeds. A poll
//     with a nonce on a record without one claims it.
//   - A poll from another instance is refused (409 conflict naming the
//     id) and changes nothing: no ack, no lastSeen, no held poll
//     answered — while the holder is not safe by silence. Once it is
//     (silent past gateway_timeout under silent_gateways: fence: it
//     has self-fenced, and the watermark already ignores it) the
//     newcomer takes the id as a new gateway: the old record is
//     forgotten (as forgetSilentGateway does, acknowledging nothing on
//     its behalf) and a new one registered, which acknowledges only
//     what the newcomer's own polls say. Under silent_gateways: serve a
//     silent holder keeps the id until it leaves (or a leave without a
//     nonce is sent on its behalf).
//   - A clean leave forgets the record, so a restarted process takes
//     the id at once; a leave from a non-holder is refused.
//
// The holder is kept in memory only: after a coordinator restart or a
// takeover the first instance to poll holds the id. Refusals are counted
// on the holder's record (GET /v1/admin/gateways: conflicts,
// last_conflict) and by the shell's metric.

// claimGateway checks a poll from instance under id: ok false when it
// answered the conflict; gw nil when the id is free (unknown, or just
// taken from a silent holder) and the caller registers it.
func (m *Machine) claimGateway(ref Ref, id, instance string) (gw *gateway, ok bool) {
	gw = m.gateways[id]
	switch {
	case gw == nil:
		return nil, true
	case !m.foreignInstance(gw, instance):
		if instance != "" {
			gw.instance = instance
		}
		return gw, true
	case m.safeBySilence(gw):
		m.forgetGateway(gw)
		return nil, true
	}
	m.conflictRejection(ref, gw)
	return nil, false
}

// foreignInstance reports whether instance is a live process other than
// the one holding gw's id.
func (m *Machine) foreignInstance(gw *gateway, instance string) bool {
	return instance != "" && gw.instance != "" && instance != gw.instance
}

func (m *Machine) conflictRejection(ref Ref, gw *gateway) {
	gw.conflicts++
	gw.lastConflict = m.now
	frees := "it frees the id once silent longer than gateway_timeout"
	if m.cfg.SilentGateways == SilentGatewaysServe {
		frees = "under silent_gateways: serve only its leave (POST /v1/sync/leave) frees the id"
	}
	m.reject(ref, api.CodeConflict,
		"sync: gateway id %q is held by another gateway process (last poll %s ago; %s); give each gateway its own gateway.id (or leave it unset: it defaults to host name:listen port)",
		gw.id, m.now.Sub(gw.lastSeen).Truncate(time.Millisecond), frees)
}
