package authz

import (
	"time"

	"github.com/capgate/capgate/ocap"
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
// deny-list (c's jti and every ancestor in chn), revoked members, then
// topic, partition, op and offset range. It takes one read lock and never
// allocates.
//
// Decide does not raise fences; the shell calls v.Raise when it verifies
// a capability for the first time.
func Decide(c *ocap.Claims, req Request, v *View, now time.Time) Reason {
	if now.Unix() >= int64(c.ExpiresAt)+v.leeway {
		return Expired
	}
	if r := v.revoked(c); r != Allow {
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

// revoked checks c against the fences, the deny-list and the revoked
// members.
func (v *View) revoked(c *ocap.Claims) Reason {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if c.Epoch != 0 && c.Epoch < v.fences[FenceKey{c.Group, c.Topic, c.PartitionNumber()}] {
		return Fenced
	}
	if _, ok := v.denied[c.ID]; ok {
		return Denied
	}
	for _, ancestor := range c.Chain {
		if _, ok := v.denied[ancestor]; ok {
			return Denied
		}
	}
	if c.Group != "" && len(v.members) > 0 {
		if _, ok := v.members[memberKey{c.Group, c.Subject}]; ok {
			return RevokedMember
		}
	}
	return Allow
}
