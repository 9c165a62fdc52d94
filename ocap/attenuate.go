package ocap

import (
	"fmt"
	"time"
)

// Attenuation asks for a narrower child of a capability. Zero values keep
// the parent's setting.
type Attenuation struct {
	Ops            Ops          // must be a subset of the parent's
	Offsets        *OffsetRange // must lie inside the parent's range
	TTL            time.Duration
	MaxBytesPerSec int64 // must not exceed the parent's limit (if it has one)
}

// Attenuate derives the claims of a child capability from a verified
// parent at now. The child keeps the parent's holder, group, topic,
// partition and epoch, never outlives it, and carries chn = the parent's
// chain plus the parent's jti, so denying any ancestor denies the child.
// Any widening is refused with ErrWiden. The caller mints the result
// (Minter.Mint) with ExpiresAt-now as the ttl; jti is left empty.
func Attenuate(parent *Claims, a Attenuation, now time.Time) (Claims, time.Duration, error) {
	if parent.kind != KindCapability {
		return Claims{}, 0, fmt.Errorf("%w: parent is a %s, not a capability", ErrBadType, parent.kind)
	}
	child := *parent
	child.ID, child.Caveats = "", nil
	if err := narrowOps(&child, a.Ops); err != nil {
		return Claims{}, 0, err
	}
	if err := narrowOffsets(&child, a.Offsets); err != nil {
		return Claims{}, 0, err
	}
	if child.Offsets != nil && child.Ops.Has(OpProduce) {
		return Claims{}, 0, fmt.Errorf("%w: %s, e.g. ops [\"fetch\"]", ErrBadOffsetRange, offsetsReadOnly)
	}
	if err := narrowRate(&child, a.MaxBytesPerSec); err != nil {
		return Claims{}, 0, err
	}
	if len(parent.Chain) >= MaxChain {
		return Claims{}, 0, fmt.Errorf("%w: chain already %d long", ErrWiden, len(parent.Chain))
	}
	child.Chain = append(append(make([]string, 0, len(parent.Chain)+1), parent.Chain...), parent.ID)
	ttl, err := narrowLease(parent, a.TTL, now)
	if err != nil {
		return Claims{}, 0, err
	}
	return child, ttl, nil
}

func narrowOps(c *Claims, ops Ops) error {
	if ops == 0 {
		return nil
	}
	if !ops.SubsetOf(c.Ops) {
		return fmt.Errorf("%w: ops %s not within %s", ErrWiden, ops, c.Ops)
	}
	c.Ops = ops
	return nil
}

func narrowOffsets(c *Claims, r *OffsetRange) error {
	if r == nil {
		return nil
	}
	if !r.valid() {
		return fmt.Errorf("%w: [%d, %d)", ErrBadOffsetRange, r.From, r.To)
	}
	parent := OffsetRange{}
	if c.Offsets != nil {
		parent = *c.Offsets
	}
	if !r.Within(parent) {
		return fmt.Errorf("%w: offsets [%d, %d) not within [%d, %d)", ErrWiden, r.From, r.To, parent.From, parent.To)
	}
	c.Offsets = &OffsetRange{From: r.From, To: r.To}
	return nil
}

func narrowRate(c *Claims, bps int64) error {
	if bps == 0 {
		return nil
	}
	if bps < 0 {
		return fmt.Errorf("%w: bps %d", ErrBadQoS, bps)
	}
	q := QoS{}
	if c.QoS != nil {
		q = *c.QoS
	}
	if q.MaxBytesPerSec != 0 && bps > q.MaxBytesPerSec {
		return fmt.Errorf("%w: %d bytes/s above the parent's %d", ErrWiden, bps, q.MaxBytesPerSec)
	}
	q.MaxBytesPerSec = bps
	c.QoS = &q
	return nil
}

func narrowLease(parent *Claims, ttl time.Duration, now time.Time) (time.Duration, error) {
	left := time.Duration(int64(parent.ExpiresAt)-now.Unix()) * time.Second
	if left < time.Second {
		return 0, fmt.Errorf("%w: parent expires in %v", ErrExpired, left)
	}
	if ttl == 0 {
		return left, nil
	}
	if ttl < 0 || ttl > left {
		return 0, fmt.Errorf("%w: ttl %v beyond the parent's remaining %v", ErrWiden, ttl, left)
	}
	return ttl, nil
}
