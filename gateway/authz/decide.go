package authz

import (
	"time"

	"github.com/capgate/capgate/ocap"
	"github.com/capgate/capgate/revocation"
)

// Request is what a client asks a gateway to do with a capability.
type Request struct {
	Topic     string
	Partition int32
	Op        ocap.Op
	// Offset is the fetch offset checked against the capability's off
	// range; negative means the request reads no offset (produce).
	Offset int64
}

// Decide says whether capability c (already verified, signature and
// claims, by ocap) may serve req at now under view v. It checks, in this
// order: expiry (exp + leeway), the epoch fence of c's own partition, the
// deny-list (c's jti and every ancestor in chn), revoked members (the
// last two under the one expiry rule of package revocation), then
// topic, partition, op and offset range. It takes one read lock and never
// allocates.
//
// Decide does not raise fences; the shell calls v.Raise when it verifies
// a capability for the first time.
func Decide(c *ocap.Claims, req Request, v *View, now time.Time) Reason {
	if now.Unix() >= int64(c.ExpiresAt)+v.leeway.Load() {
		return Expired
	}
	if r := v.revoked(c, now); r != Allow {
		return r
	}
	switch {
	case c.Topic != req.Topic:
		return WrongTopic
	case c.PartitionNumber() != req.Partition:
		return WrongPartition
	case !c.Ops.Has(req.Op):
		return WrongOp
	case req.Offset >= 0 && !c.AllowsOffset(req.Offset):
		return OffsetOutsideRange
	}
	return Allow
}

// DecideCredential says whether client credential c (the Kafka
// listener's connection principal, verified by ocap as KindClient) is
// still good at now under v: Decide is made for capabilities and, on a
// credential (no topic, partition or ops), answers a scope reason once
// expiry, the deny-list and the member checks passed, so only those
// verdicts refuse it; Allow otherwise.
func DecideCredential(c *ocap.Claims, v *View, now time.Time) Reason {
	switch r := Decide(c, Request{Topic: c.Topic, Partition: c.PartitionNumber(), Op: ocap.OpFetch, Offset: -1}, v, now); r {
	case Expired, Fenced, Denied, RevokedMember:
		return r
	}
	return Allow
}

// Refuses reports whether v refuses a request in flight at now: one
// admitted under capability c for req, or under client credential c
// (DecideCredential: a credential's produce is refused by its own
// revocation, not by every one).
func Refuses(c *ocap.Claims, req Request, v *View, now time.Time) bool {
	if c.Kind() == ocap.KindClient {
		return DecideCredential(c, v, now) != Allow
	}
	return Decide(c, req, v, now) != Allow
}

// revoked checks c against the fences, the deny-list and the revoked
// members (revocation.Set.Check, under the view's one expiry rule).
func (v *View) revoked(c *ocap.Claims, now time.Time) Reason {
	v.mu.RLock()
	verdict := v.set.Check(c, now)
	v.mu.RUnlock()
	switch verdict {
	case revocation.Fenced:
		return Fenced
	case revocation.Denied:
		return Denied
	case revocation.RevokedMember:
		return RevokedMember
	}
	return Allow
}
