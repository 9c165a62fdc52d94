package coordinator

import (
	"errors"
	"sync"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/group"
	"github.com/capgate/capgate/ocap"
	"github.com/capgate/capgate/revocation"
	"github.com/capgate/capgate/store"
)

// errDenied: the token (or an ancestor it was attenuated from) was denied
// through POST /v1/admin/capabilities/{jti}/revoke, or its member was
// revoked (directly, or by denying the credential that opened it).
var errDenied = errors.New("token denied by an administrator")

// errMemberRevoked: a member token of a member an administrator revoked;
// answered 409 unknown_member on every route that takes a member token,
// a rejoin with it included (writeMemberTokenError), so a client joins again
// with a credential that is not denied.
var errMemberRevoked = errors.New("member revoked by an administrator: join again with a client credential")

// revocations is the coordinator's own copy of the revocation view
// (package revocation, the same rule every gateway applies), so the
// tokens it accepts itself — client credentials at join, member tokens,
// capabilities presented to commit or attenuate — are refused like the
// gateways refuse them: denied ids and their chains, revoked members.
// Filled from the store at start and from the revocation records of every
// persisted Ready before any of its replies is sent (persist.go), so it
// holds what the machine holds: at most groups.limits.denied ids, each
// pruned once its token expired everywhere. Safe for concurrent use.
type revocations struct {
	mu  sync.RWMutex
	set *revocation.Set
}

func newRevocations(rule revocation.Rule, denied []store.Denied, members []store.RevokedMember) *revocations {
	r := &revocations{set: revocation.New(rule)}
	for _, d := range denied {
		r.set.Deny(d.JTI, d.Exp)
	}
	for _, m := range members {
		r.set.RevokeMember(revocation.MemberKey{Group: m.Group, Member: m.MemberID}, m.Until)
	}
	return r
}

// apply takes the revocation records of one persisted Ready. A deleted
// record only means something lapsed: the rule already ignores it, and
// Prune frees it.
func (r *revocations) apply(records []group.Record, now time.Time) {
	var denied []api.Denied
	var members []api.RevokedMember
	prune := false
	for _, rec := range records {
		switch rec := rec.(type) {
		case group.DeniedRecord:
			if prune = prune || rec.Deleted; !rec.Deleted {
				denied = append(denied, rec.Denied)
			}
		case group.RevokedMemberRecord:
			if prune = prune || rec.Deleted; !rec.Deleted {
				members = append(members, rec.RevokedMember)
			}
		}
	}
	if len(denied) == 0 && len(members) == 0 && !prune {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range denied {
		r.set.Deny(d.JTI, d.Exp)
	}
	for _, m := range members {
		r.set.RevokeMember(revocation.MemberKey{Group: m.Group, Member: m.MemberID}, m.Until)
	}
	if prune {
		r.set.Prune(now)
	}
}

// check says whether c (its jti, an ancestor, or its member) is revoked
// at now. The coordinator keeps no fences here: commits are fenced by the
// machine's epochs.
func (r *revocations) check(c *ocap.Claims, now time.Time) revocation.Verdict {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.set.Check(c, now)
}

// refusal is the error for a token of kind the view refuses at now, or nil.
func (r *revocations) refusal(c *ocap.Claims, kind ocap.Kind, now time.Time) error {
	switch r.check(c, now) {
	case revocation.Allow:
		return nil
	case revocation.RevokedMember:
		if kind == ocap.KindMember {
			return errMemberRevoked
		}
	}
	return errDenied
}
