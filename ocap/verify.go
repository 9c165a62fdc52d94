package ocap

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Limits of the verifier.
const (
	// MaxTokenBytes is the size cap checked before any parsing.
	MaxTokenBytes = 4096
	// MaxLeeway bounds clock leeway (DESIGN §3).
	MaxLeeway = 2 * time.Second
	// MaxChain bounds the number of ancestors of an attenuated capability.
	MaxChain = 8
)

// VerifierConfig holds what a verifier checks tokens against.
type VerifierConfig struct {
	Issuer   string        // coordinator.id
	Audience string        // cluster
	Leeway   time.Duration // ≤ MaxLeeway
	MaxLease time.Duration // bound on exp - iat for capabilities
	// MaxCredentialTTL bounds exp - iat for client credentials and member
	// tokens; 0 means 30 days.
	MaxCredentialTTL time.Duration
}

func (c VerifierConfig) validate() error {
	switch {
	case c.Issuer == "":
		return errors.New("ocap: verifier: issuer is empty")
	case c.Audience == "":
		return errors.New("ocap: verifier: audience is empty")
	case c.Leeway < 0 || c.Leeway > MaxLeeway:
		return fmt.Errorf("ocap: verifier: leeway must be in [0, %v], got %v", MaxLeeway, c.Leeway)
	case c.MaxLease <= 0:
		return fmt.Errorf("ocap: verifier: max_lease must be > 0, got %v", c.MaxLease)
	}
	return nil
}

// Verifier checks tokens strictly (DESIGN §3): golang-jwt's parser with
// its strict options does the JOSE work (segments, strict base64url, alg,
// signature, exp/nbf/iat with leeway, iss, aud), and capgate's own rules
// run on top of it (size cap, headers, typ per kind, kid, integer times,
// unknown claims, lease, shape per kind; see checkClaims). Every failure
// is one of the package's sentinel errors. Safe for concurrent use; keys
// are replaced atomically by SetKeys.
type Verifier struct {
	cfg  VerifierConfig
	keys atomic.Pointer[keySet]
}

type keySet struct {
	keys    map[string]ed25519.PublicKey
	retired map[string]bool
}

// NewVerifier makes a verifier with no keys (every token is refused with
// ErrUnknownKid until SetKeys).
func NewVerifier(cfg VerifierConfig) (*Verifier, error) {
	if cfg.MaxCredentialTTL == 0 {
		cfg.MaxCredentialTTL = 30 * 24 * time.Hour
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	v := &Verifier{cfg: cfg}
	v.keys.Store(&keySet{keys: map[string]ed25519.PublicKey{}, retired: map[string]bool{}})
	return v, nil
}

// Config returns the verifier's configuration.
func (v *Verifier) Config() VerifierConfig { return v.cfg }

// SetKeys replaces the verification keys. Keys that were known and are no
// longer present become retired (tokens they signed fail with
// ErrKeyRetired). It returns the kids removed, so callers can flush them
// from their caches.
func (v *Verifier) SetKeys(keys map[string]ed25519.PublicKey) (removed []string) {
	old := v.keys.Load()
	next := &keySet{keys: make(map[string]ed25519.PublicKey, len(keys)), retired: make(map[string]bool, len(old.retired)+len(old.keys))}
	for kid, k := range keys {
		next.keys[kid] = k
	}
	for kid := range old.retired {
		if _, back := keys[kid]; !back {
			next.retired[kid] = true
		}
	}
	for kid := range old.keys {
		if _, kept := keys[kid]; !kept {
			next.retired[kid] = true
			removed = append(removed, kid)
		}
	}
	v.keys.Store(next)
	return removed
}

// HasKey reports whether kid is one of the verification keys now: a
// token verified earlier under a key since removed (retired, or a
// verifier of new settings without it) no longer stands.
func (v *Verifier) HasKey(kid string) bool {
	_, ok := v.keys.Load().keys[kid]
	return ok
}

// options are golang-jwt's strict parser options for a check at now:
// EdDSA only, strict base64url (canonical trailing bits), iss and aud
// required and equal to ours, exp required, iat not in the future, nbf,
// all with the leeway, on the caller's clock.
func (v *Verifier) options(now time.Time) []jwt.ParserOption {
	return v.optionsWith(now, v.cfg.Leeway)
}

// optionsWith is options with leeway instead of the configured one.
func (v *Verifier) optionsWith(now time.Time, leeway time.Duration) []jwt.ParserOption {
	return []jwt.ParserOption{
		jwt.WithValidMethods([]string{jwt.SigningMethodEdDSA.Alg()}),
		jwt.WithStrictDecoding(),
		jwt.WithIssuer(v.cfg.Issuer),
		jwt.WithAudience(v.cfg.Audience),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(leeway),
		jwt.WithTimeFunc(func() time.Time { return now }),
	}
}

// Verify checks token as a token of kind at time now and returns its
// claims. Every failure is one of the package's sentinel errors.
func (v *Verifier) Verify(token string, kind Kind, now time.Time) (*Claims, error) {
	// Before any parsing (golang-jwt has no size limit of its own).
	if len(token) > MaxTokenBytes {
		return nil, fmt.Errorf("%w: %d bytes > %d", ErrTooLarge, len(token), MaxTokenBytes)
	}
	c := &Claims{}
	parsed, err := jwt.NewParser(v.options(now)...).ParseWithClaims(token, (*jwtClaims)(c), v.keyFunc(kind))
	if err != nil {
		return nil, v.reason(token, parsed, err, now)
	}
	c.kind, c.kid = kind, parsed.Header["kid"].(string)
	if err := v.checkRules(c); err != nil {
		return nil, err
	}
	return c, nil
}

// VerifyExpiredWithin is Verify for a token that may have expired up to
// grace beyond the leeway (exp + leeway + grace > now); everything else
// is checked as Verify checks it — iat no later than now + leeway, nbf
// as golang-jwt reads it with the wider leeway (capgate mints none in
// the future). Only for a check whose caller proves the rest by itself
// (the coordinator's renewal grace: a fresh credential bound to a live
// member, revocations kept that much longer). grace <= 0 is Verify.
func (v *Verifier) VerifyExpiredWithin(token string, kind Kind, now time.Time, grace time.Duration) (*Claims, error) {
	if grace <= 0 {
		return v.Verify(token, kind, now)
	}
	if len(token) > MaxTokenBytes {
		return nil, fmt.Errorf("%w: %d bytes > %d", ErrTooLarge, len(token), MaxTokenBytes)
	}
	c := &Claims{}
	parsed, err := jwt.NewParser(v.optionsWith(now, v.cfg.Leeway+grace)...).ParseWithClaims(token, (*jwtClaims)(c), v.keyFunc(kind))
	if err != nil {
		return nil, v.reason(token, parsed, err, now)
	}
	if time.Unix(int64(c.IssuedAt), 0).After(now.Add(v.cfg.Leeway)) { // the wider leeway is for exp only
		return nil, fmt.Errorf("%w: iat %s is in the future", ErrBadTime, TimeText(c.IssuedAt, now))
	}
	c.kind, c.kid = kind, parsed.Header["kid"].(string)
	if err := v.checkRules(c); err != nil {
		return nil, err
	}
	return c, nil
}

// forbiddenHeaders may redirect key lookup or demand semantics we do not
// implement; any other header than alg, kid, typ is refused as well.
var forbiddenHeaders = map[string]bool{"crit": true, "jku": true, "jwk": true, "x5u": true, "x5c": true, "x5t": true, "x5t#S256": true, "b64": true, "zip": true}

// keyFunc applies capgate's header rules, which golang-jwt leaves to the
// caller, and looks the key up: no header but alg, kid and typ (so no
// crit, jku, jwk, x5u, x5c: nothing may redirect the key lookup or demand
// semantics we do not implement), typ is the expected kind, kid is
// well-formed and known. golang-jwt has checked alg (WithValidMethods)
// before calling it.
func (v *Verifier) keyFunc(kind Kind) jwt.Keyfunc {
	return func(t *jwt.Token) (any, error) {
		if err := checkHeaderKeys(t.Raw); err != nil {
			return nil, err
		}
		for name := range t.Header {
			if forbiddenHeaders[name] || (name != "alg" && name != "kid" && name != "typ") {
				return nil, fmt.Errorf("%w: %.20q (a capgate token's header holds alg, kid and typ only)", ErrForbiddenHeader, name)
			}
		}
		if typ := t.Header["typ"]; typ != string(kind) {
			return nil, typeError(typ, kind)
		}
		raw, present := t.Header["kid"]
		kid, isString := raw.(string)
		switch {
		case !present:
			return nil, fmt.Errorf("%w: the header names no signing key", ErrMissingKid)
		case !isString:
			// Not a string (a number, an object): %q would print
			// "%!q(float64=5)".
			return nil, fmt.Errorf("%w: a %s, want a string", ErrBadKid, jsonKind(raw))
		case !ValidKeyID(kid):
			return nil, fmt.Errorf("%w: %.70q", ErrBadKid, kid)
		}
		ks := v.keys.Load()
		if pub, ok := ks.keys[kid]; ok {
			return pub, nil
		}
		if ks.retired[kid] {
			return nil, fmt.Errorf("%w: %s was rotated out; the holder needs a token signed with a current key", ErrKeyRetired, kid)
		}
		return nil, fmt.Errorf("%w: %s is not among this verifier's %d keys (signed by another coordinator or cluster, or a key not synced yet)", ErrUnknownKid, kid, len(ks.keys))
	}
}

// sentinels are capgate's own reasons, which golang-jwt carries through
// (from the claims decoder, the key function and the claims validator):
// when one is in the error chain it is the reason.
var sentinels = []error{
	ErrBadTime, ErrUnknownOp, ErrBadOffsetRange, ErrBadClaims,
	ErrForbiddenHeader, ErrBadType, ErrMissingKid, ErrBadKid, ErrKeyRetired, ErrUnknownKid,
}

// reason maps a golang-jwt failure onto exactly one sentinel, in
// capgate's words (reasons.go). golang-jwt reports claim failures joined
// and a missing claim without naming it (ErrTokenRequiredClaimMissing);
// the parsed claims say which one it was. token is the token verified
// ("" for the minter's self-check).
func (v *Verifier) reason(token string, t *jwt.Token, err error, now time.Time) error {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return ours(err, s)
		}
	}
	var c *jwtClaims
	if t != nil {
		c, _ = t.Claims.(*jwtClaims)
	}
	missing := errors.Is(err, jwt.ErrTokenRequiredClaimMissing) && c != nil
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed) && t != nil && t.Method != nil:
		// Header and claims decoded, the method found: the signature
		// segment is what failed to decode (strict base64url).
		return fmt.Errorf("%w: the signature segment is not unpadded base64url", ErrBadSignature)
	case errors.Is(err, jwt.ErrTokenMalformed) && t != nil && t.Header != nil && !corruptBase64(err):
		// The header decoded; the claims are base64url but not one JSON
		// object (trailing data, bad syntax).
		return claimsJSONError(err)
	case errors.Is(err, jwt.ErrTokenMalformed):
		return malformed(token)
	case errors.Is(err, jwt.ErrTokenUnverifiable) && t != nil:
		return algorithmError(t) // alg missing, not a string, or unknown
	case errors.Is(err, jwt.ErrTokenSignatureInvalid) && t != nil && t.Method.Alg() != jwt.SigningMethodEdDSA.Alg():
		return fmt.Errorf("%w: alg %.20q", ErrBadAlgorithm, t.Method.Alg()) // WithValidMethods
	case errors.Is(err, jwt.ErrTokenSignatureInvalid) && t != nil:
		return signatureError(t)
	case missing && c.ExpiresAt == 0:
		return fmt.Errorf("%w: a capgate token always has one", ErrMissingExp)
	case errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return fmt.Errorf("%w: iat %s", ErrIssuedInFuture, TimeText(c.IssuedAt, now))
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return fmt.Errorf("%w: nbf %s", ErrNotYetValid, TimeText(c.NotBefore, now))
	case errors.Is(err, jwt.ErrTokenExpired):
		return fmt.Errorf("%w: exp %s", ErrExpired, TimeText(c.ExpiresAt, now))
	case errors.Is(err, jwt.ErrTokenInvalidIssuer) || missing && c.Issuer == "":
		return fmt.Errorf("%w: %s, want %q", ErrBadIssuer, quotedOrNone(c.Issuer), v.cfg.Issuer)
	case errors.Is(err, jwt.ErrTokenInvalidAudience) || missing && c.Audience == "":
		return fmt.Errorf("%w: %s, want %q", ErrBadAudience, quotedOrNone(c.Audience), v.cfg.Audience)
	}
	return fmt.Errorf("%w: %v", ErrMalformed, err)
}

// quotedOrNone is a claim's value for a message: quoted, or "none".
func quotedOrNone(s string) string {
	if s == "" {
		return "none"
	}
	return fmt.Sprintf("%.80q", s)
}

// TimeText is a claim's time for people: RFC 3339 and how far from now
// ("2026-12-03T03:04:05Z, 3m ago" or "…, in 42s"), never epoch seconds.
func TimeText(at Seconds, now time.Time) string {
	t := time.Unix(int64(at), 0).UTC()
	d := now.Sub(t)
	if d >= 0 {
		return t.Format(time.RFC3339) + ", " + roughly(d) + " ago"
	}
	return t.Format(time.RFC3339) + ", in " + roughly(-d)
}

// roughly is d in its two largest units: 42s, 3m, 3m12s, 2h5m, 3d4h.
func roughly(d time.Duration) string {
	s := int64(d / time.Second)
	day, hour, minute := int64(24*60*60), int64(60*60), int64(60)
	pair := func(a int64, au string, b int64, bu string) string {
		if b == 0 {
			return fmt.Sprintf("%d%s", a, au)
		}
		return fmt.Sprintf("%d%s%d%s", a, au, b, bu)
	}
	switch {
	case s >= day:
		return pair(s/day, "d", s%day/hour, "h")
	case s >= hour:
		return pair(s/hour, "h", s%hour/minute, "m")
	case s >= minute:
		return pair(s/minute, "m", s%minute, "s")
	}
	return fmt.Sprintf("%ds", s)
}
