package group

import "time"

// What admin requests add is bounded by count too (Config.Limits), not
// only by time: a script gone wrong, or a leaked admin token, could
// otherwise fill the coordinator — and every gateway, which holds each
// QoS override and denied id and receives all of them in every reset
// snapshot — faster than entries expire.
//
//   - limits.qos_overrides: QoS overrides in force. A PUT naming a known
//     override id (by default the selector's) always merges into it.
//   - limits.denied: denied token ids. Denying a known id again (a later
//     exp) is never refused; the entries go when their tokens have
//     expired everywhere (exp + leeway + max_clock_skew, the prune timer).
//   - limits.groups also bounds the groups an admin's group config
//     creates (such a group has non-default settings, so the reaper never
//     forgets it), as it bounds the groups joins create.
//
// Past a bound the request is refused with 409 limit_exceeded naming the
// setting before anything changes: no sync entry, record, member
// revocation or group.

// admitQoS refuses a PutQoS that would add an override past
// limits.qos_overrides.
func (m *Machine) admitQoS(e PutQoS) bool {
	_, known := m.qos[e.Override.ID]
	adds := !known && time.Unix(e.Override.Until, 0).After(m.now)
	if max := m.cfg.Limits.QoSOverrides; adds && len(m.qos) >= max {
		m.limitRejection(e.Ref, "qos_overrides", int64(max), "qos: %d overrides in force", len(m.qos))
		return false
	}
	return true
}

// admitDeny refuses a DenyJTI that would add jti, denied until exp, past
// limits.denied (a lapsed exp adds nothing).
func (m *Machine) admitDeny(ref Ref, jti string, exp int64) bool {
	if _, known := m.revocations.DenyExp(jti); known || !m.expiresEverywhere(exp).After(m.now) {
		return true
	}
	if denied, _ := m.revocations.Len(); denied >= m.cfg.Limits.Denied {
		m.limitRejection(ref, "denied", int64(m.cfg.Limits.Denied), "deny: %d token ids denied", denied)
		return false
	}
	return true
}

// admitAdminGroup refuses a group config that would create a group past
// limits.groups.
func (m *Machine) admitAdminGroup(ref Ref, name string) bool {
	if m.groups[name] == nil && len(m.groups) >= m.cfg.Limits.Groups {
		m.limitRejection(ref, "groups", int64(m.cfg.Limits.Groups), "group config: the coordinator holds %d groups", len(m.groups))
		return false
	}
	return true
}
