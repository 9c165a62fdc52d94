package ocap

import (
	"fmt"
	"time"
)

// checkClaims applies every claim rule for the token's kind at now.
func (v *Verifier) checkClaims(c *Claims, now time.Time) error {
	if err := v.checkTimes(c, now); err != nil {
		return err
	}
	switch {
	case c.Issuer != v.cfg.Issuer:
		return fmt.Errorf("%w: %.80q", ErrBadIssuer, c.Issuer)
	case c.Audience != v.cfg.Audience:
		return fmt.Errorf("%w: %.80q", ErrBadAudience, c.Audience)
	case !validJTI(c.ID):
		return fmt.Errorf("%w: %.40q", ErrBadJTI, c.ID)
	case c.Subject == "" || len(c.Subject) > 255:
		return ErrBadSubject
	}
	return checkShape(c)
}

func (v *Verifier) checkTimes(c *Claims, now time.Time) error {
	n, leeway := now.Unix(), int64(v.cfg.Leeway/time.Second)
	maxTTL := v.cfg.MaxLease
	if c.kind != KindCapability {
		maxTTL = v.cfg.MaxCredentialTTL
	}
	switch {
	case c.ExpiresAt == 0:
		return ErrMissingExp
	case c.IssuedAt == 0:
		return ErrMissingIat
	case c.ExpiresAt <= c.IssuedAt:
		return fmt.Errorf("%w: exp %d not after iat %d", ErrBadTime, c.ExpiresAt, c.IssuedAt)
	case time.Duration(c.ExpiresAt-c.IssuedAt)*time.Second > maxTTL:
		return fmt.Errorf("%w: %ds > %v", ErrLeaseTooLong, c.ExpiresAt-c.IssuedAt, maxTTL)
	case int64(c.IssuedAt) > n+leeway:
		return fmt.Errorf("%w: iat %d, now %d", ErrIssuedInFuture, c.IssuedAt, n)
	case int64(c.NotBefore) > n+leeway:
		return fmt.Errorf("%w: nbf %d, now %d", ErrNotYetValid, c.NotBefore, n)
	case n >= int64(c.ExpiresAt)+leeway:
		return fmt.Errorf("%w: exp %d, now %d", ErrExpired, c.ExpiresAt, n)
	}
	return nil
}

// checkShape checks the claims each kind requires and refuses the ones
// that do not belong to it.
func checkShape(c *Claims) error {
	switch c.kind {
	case KindCapability:
		return checkCapability(c)
	case KindClient:
		if len(c.Groups) == 0 {
			return fmt.Errorf("%w: client credential names no group", ErrBadGroup)
		}
		if c.Group != "" || c.Topic != "" || c.Partition != nil || c.Epoch != 0 || c.Ops != 0 || c.Offsets != nil || len(c.Chain) != 0 {
			return fmt.Errorf("%w: capability claims in a client credential", ErrBadClaims)
		}
	case KindMember:
		if !ValidName(c.Group) {
			return fmt.Errorf("%w: %.80q", ErrBadGroup, c.Group)
		}
		if c.Topic != "" || c.Partition != nil || c.Epoch != 0 || c.Ops != 0 || c.Offsets != nil || len(c.Groups) != 0 {
			return fmt.Errorf("%w: foreign claims in a member token", ErrBadClaims)
		}
	default:
		return fmt.Errorf("%w: unknown kind %q", ErrBadType, c.kind)
	}
	return nil
}

func checkCapability(c *Claims) error {
	switch {
	case !ValidTopic(c.Topic):
		return fmt.Errorf("%w: %.80q", ErrBadTopic, c.Topic)
	case c.Partition == nil || *c.Partition < 0:
		return ErrBadPartition
	case c.Ops == 0:
		return ErrNoOps
	case c.Ops&^opsAll != 0:
		return ErrUnknownOp
	case c.Group != "" && !ValidName(c.Group):
		return fmt.Errorf("%w: %.80q", ErrBadGroup, c.Group)
	case c.Epoch != 0 && c.Group == "":
		return fmt.Errorf("%w: fenced capability without a group", ErrBadGroup)
	case c.Offsets != nil && !c.Offsets.valid():
		return ErrBadOffsetRange
	case len(c.Groups) != 0 || len(c.Topics) != 0:
		return fmt.Errorf("%w: client claims in a capability", ErrBadClaims)
	case len(c.Chain) > MaxChain:
		return fmt.Errorf("%w: chain of %d > %d", ErrBadClaims, len(c.Chain), MaxChain)
	}
	for _, j := range c.Chain {
		if !validJTI(j) {
			return fmt.Errorf("%w: chain entry %.40q", ErrBadJTI, j)
		}
	}
	return checkQoS(c.QoS)
}

func checkQoS(q *QoS) error {
	if q == nil {
		return nil
	}
	switch q.LogLevel {
	case "", "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("%w: lvl %.20q", ErrBadQoS, q.LogLevel)
	}
	if q.MaxBytesPerSec < 0 || len(q.Monitor) > 64 {
		return fmt.Errorf("%w: bps %d, mon of %d bytes", ErrBadQoS, q.MaxBytesPerSec, len(q.Monitor))
	}
	return nil
}

// validJTI: 128 bits, base64url without padding (22 characters).
func validJTI(s string) bool {
	if len(s) != 22 {
		return false
	}
	b, err := b64.DecodeString(s)
	return err == nil && len(b) == 16
}

// ValidTopic reports whether s is a legal Kafka topic name.
func ValidTopic(s string) bool {
	if len(s) == 0 || len(s) > 249 || s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// ValidName reports whether s is a legal group or holder name: 1 to 255
// printable ASCII characters without '/', so it fits in URL paths and keys.
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > 255 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c > '~' || c == '/' {
			return false
		}
	}
	return true
}
