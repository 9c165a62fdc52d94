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
//     A DenyJTIs is admitted whole or refused whole.
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

// admitDenials refuses a deny whose new ids (not denied yet, exps[i] not
// lapsed everywhere; each counted once) would not all fit under
// limits.denied: a multi-id deny is all or none.
func (m *Machine) admitDenials(ref Ref, ds []Denial, exps []int64) bool {
	adds := map[string]bool{}
	for i, d := range ds {
		if _, known := m.revocations.DenyExp(d.JTI); !known && m.expiresEverywhere(exps[i]).After(m.now) {
			adds[d.JTI] = true
		}
	}
	denied, _ := m.revocations.Len()
	if len(adds) > 0 && denied+len(adds) > m.cfg.Limits.Denied {
		m.limitRejection(ref, "denied", int64(m.cfg.Limits.Denied), "deny: %d token ids denied, %d more do not fit", denied, len(adds))
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
