package ocap

import "errors"

// Verification failures, one per reason. Wrapped errors carry detail;
// test with errors.Is.
var (
	ErrTooLarge        = errors.New("ocap: token larger than the size cap")
	ErrMalformed       = errors.New("ocap: malformed token")
	ErrBadAlgorithm    = errors.New("ocap: algorithm not EdDSA")
	ErrBadType         = errors.New("ocap: wrong token type")
	ErrForbiddenHeader = errors.New("ocap: forbidden header")
	ErrMissingKid      = errors.New("ocap: missing kid")
	ErrBadKid          = errors.New("ocap: malformed kid")
	ErrUnknownKid      = errors.New("ocap: unknown kid")
	ErrKeyRetired      = errors.New("ocap: signing key retired")
	ErrBadSignature    = errors.New("ocap: bad signature")
	ErrBadClaims       = errors.New("ocap: malformed claims")
	ErrBadTime         = errors.New("ocap: time claim not an integer number of seconds")
	ErrMissingExp      = errors.New("ocap: missing exp")
	ErrMissingIat      = errors.New("ocap: missing iat")
	ErrExpired         = errors.New("ocap: token expired")
	ErrNotYetValid     = errors.New("ocap: token not valid yet (nbf)")
	ErrIssuedInFuture  = errors.New("ocap: token issued in the future (iat)")
	ErrLeaseTooLong    = errors.New("ocap: lease longer than max_lease")
	ErrBadIssuer       = errors.New("ocap: wrong issuer")
	ErrBadAudience     = errors.New("ocap: wrong audience")
	ErrBadJTI          = errors.New("ocap: missing or malformed jti")
	ErrBadSubject      = errors.New("ocap: missing subject")
	ErrBadPartition    = errors.New("ocap: missing or negative partition")
	ErrBadTopic        = errors.New("ocap: missing or malformed topic")
	ErrUnknownOp       = errors.New("ocap: unknown op")
	ErrNoOps           = errors.New("ocap: no ops")
	ErrBadOffsetRange  = errors.New("ocap: bad offset range")
	ErrBadQoS          = errors.New("ocap: bad qos")
	ErrBadGroup        = errors.New("ocap: missing or malformed group")

	// Attenuation refusals.
	ErrWiden = errors.New("ocap: attenuation would widen the parent")
)
