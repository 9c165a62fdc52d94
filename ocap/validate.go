package ocap

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/capgate/capgate/api"
)

// jwtClaims is Claims as golang-jwt's parser sees them: the registered
// claims it validates (exp, iat, nbf, iss, aud) and a decoder that refuses
// unknown claims and trailing data (golang-jwt's own decoder accepts
// both). A conversion of *Claims, not a copy.
type jwtClaims Claims

var _ jwt.Claims = (*jwtClaims)(nil)

func numericDate(s Seconds) (*jwt.NumericDate, error) {
	if s == 0 {
		return nil, nil // absent; exp is required (WithExpirationRequired), iat by checkRules
	}
	return jwt.NewNumericDate(s.time()), nil
}

func (c *jwtClaims) GetExpirationTime() (*jwt.NumericDate, error) { return numericDate(c.ExpiresAt) }
func (c *jwtClaims) GetIssuedAt() (*jwt.NumericDate, error)       { return numericDate(c.IssuedAt) }
func (c *jwtClaims) GetNotBefore() (*jwt.NumericDate, error)      { return numericDate(c.NotBefore) }
func (c *jwtClaims) GetIssuer() (string, error)                   { return c.Issuer, nil }
func (c *jwtClaims) GetSubject() (string, error)                  { return c.Subject, nil }

// GetAudience is our one audience: aud is a single string (a list is
// refused by the decoder), which golang-jwt compares with WithAudience.
func (c *jwtClaims) GetAudience() (jwt.ClaimStrings, error) {
	if c.Audience == "" {
		return nil, nil
	}
	return jwt.ClaimStrings{c.Audience}, nil
}

// UnmarshalJSON decodes strictly (api.StrictJSON, the request bodies'
// decoder): a claim name is one of Claims' json names exactly ("TP" is
// not tp), no claim twice (encoding/json keeps the last, jq and many
// other readers the first: the gateway would enforce claims an auditor
// never sees), no unknown claim, no trailing data; times must be
// integers (Seconds), ops known, ranges valid. Hand-written beside
// golang-jwt because its decoder has none of these checks and its
// NumericDate accepts fractions and exponents (1.5, 1e300), which
// capgate refuses with ErrBadTime. It runs only on a verification, never
// on a cache hit.
func (c *jwtClaims) UnmarshalJSON(raw []byte) error {
	if err := api.StrictJSON(raw, (*Claims)(c)); err != nil {
		for _, sentinel := range []error{ErrBadTime, ErrUnknownOp, ErrBadOffsetRange, ErrBadClaims} {
			if errors.Is(err, sentinel) {
				return err
			}
		}
		return claimsJSONError(err)
	}
	return nil
}

// checkHeaderKeys refuses a JOSE header that names a key twice:
// golang-jwt decodes the header into a map, the last of duplicates wins
// ({"alg":"none","alg":"EdDSA"} is read as EdDSA), while other readers
// take the first. Names are exact already (keyFunc admits alg, kid and
// typ only). raw is the token golang-jwt parsed, whose header segment it
// has decoded, so it is strict base64url.
func checkHeaderKeys(raw string) error {
	segment, _, _ := strings.Cut(raw, ".")
	header, err := b64.DecodeString(segment)
	if err != nil {
		return fmt.Errorf("%w: the header segment is not unpadded base64url", ErrForbiddenHeader)
	}
	var keys map[string]json.RawMessage
	if err := api.StrictJSON(header, &keys); err != nil {
		return fmt.Errorf("%w: %s (a capgate token's header holds alg, kid and typ, once each)", ErrForbiddenHeader, strings.Replace(err.Error(), "key", "header", 1))
	}
	return nil
}

// checkClaims applies every claim rule for the token's kind at now — the
// ones golang-jwt's validator checks (with the verifier's options) and
// capgate's own — to claims about to be signed (the minter's self-check).
func (v *Verifier) checkClaims(c *Claims, now time.Time) error {
	if err := jwt.NewValidator(v.options(now)...).Validate((*jwtClaims)(c)); err != nil {
		return v.reason("", &jwt.Token{Claims: (*jwtClaims)(c), Method: jwt.SigningMethodEdDSA}, fmt.Errorf("%w: %w", jwt.ErrTokenInvalidClaims, err), now)
	}
	return v.checkRules(c)
}

// checkRules are capgate's claim rules beyond golang-jwt's validator,
// checked once it passed: none of them can be said with its options.
//   - iat is required: WithIssuedAt only checks an iat that is present.
//   - exp > iat and exp - iat ≤ max_lease (or the credential TTL): a lease
//     bound, not a clock check.
//   - jti is 128 bits of base64url; sub is 1-255 bytes (WithSubject
//     compares with one expected value only).
//   - the claims each kind requires and refuses (checkShape).
func (v *Verifier) checkRules(c *Claims) error {
	maxTTL := v.cfg.MaxLease
	if c.kind != KindCapability {
		maxTTL = v.cfg.MaxCredentialTTL
	}
	switch {
	case c.IssuedAt == 0:
		return ErrMissingIat
	case c.ExpiresAt <= c.IssuedAt:
		return fmt.Errorf("%w: exp %s not after iat %s", ErrBadTime, secondsText(c.ExpiresAt), secondsText(c.IssuedAt))
	case time.Duration(c.ExpiresAt-c.IssuedAt)*time.Second > maxTTL:
		return fmt.Errorf("%w: %ds > %v", ErrLeaseTooLong, c.ExpiresAt-c.IssuedAt, maxTTL)
	case !validJTI(c.ID):
		return fmt.Errorf("%w: %.40q", ErrBadJTI, c.ID)
	case c.Subject == "" || len(c.Subject) > 255:
		return ErrBadSubject
	case c.Caveats != nil:
		// Reserved (DESIGN §3) and enforced by no verifier yet: a caveat
		// restricts, so a verifier that ignored one would serve the
		// token unrestricted. Until caveats exist they fail closed.
		return fmt.Errorf("%w: claim cav: caveats are reserved and this verifier enforces none, so a token carrying them is refused", ErrBadClaims)
	}
	return checkShape(c)
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
		if c.Group != "" || c.Topic != "" || c.Partition != nil || c.Epoch != 0 || c.Offsets != nil || len(c.Chain) != 0 || c.Tenant != "" {
			return fmt.Errorf("%w: capability claims in a client credential", ErrBadClaims)
		}
		return checkClientOps(c.Ops)
	case KindMember:
		if !ValidName(c.Group) {
			return fmt.Errorf("%w: %.80q", ErrBadGroup, c.Group)
		}
		if c.Topic != "" || c.Partition != nil || c.Epoch != 0 || c.Ops != 0 || c.Offsets != nil || len(c.Groups) != 0 || c.Tenant != "" {
			return fmt.Errorf("%w: foreign claims in a member token", ErrBadClaims)
		}
	default:
		return fmt.Errorf("%w: unknown kind %q", ErrBadType, c.kind)
	}
	return nil
}

// offsetsReadOnly says why produce and an offset range never meet in a
// capability: a range bounds the offsets a holder reads; a write's offset
// is the broker's to choose, so the range could not bound it.
const offsetsReadOnly = "an offset range (off) bounds reads only; a capability with one cannot produce (drop produce from its ops)"

// checkClientOps: a client credential's op claim is absent (consume
// alone) or lists consume and optionally produce. Consume is required:
// every credential joins groups (a produce-only credential would need
// the join to refuse it, which it does not yet).
func checkClientOps(ops Ops) error {
	switch {
	case ops == 0:
		return nil
	case !ops.SubsetOf(ClientOpsAll):
		return fmt.Errorf("%w: %s in a client credential (consume, produce)", ErrUnknownOp, ops&^ClientOpsAll)
	case !ops.Has(OpConsume):
		return fmt.Errorf("%w: a client credential's ops must include consume", ErrBadClaims)
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
		return fmt.Errorf("%w: %s in a capability (fetch, commit, produce)", ErrUnknownOp, c.Ops&^opsAll)
	case c.Group != "" && !ValidName(c.Group):
		return fmt.Errorf("%w: %.80q", ErrBadGroup, c.Group)
	case c.Epoch != 0 && c.Group == "":
		return fmt.Errorf("%w: fenced capability without a group", ErrBadGroup)
	case c.Offsets != nil && !c.Offsets.valid():
		return ErrBadOffsetRange
	case c.Offsets != nil && c.Ops.Has(OpProduce):
		return fmt.Errorf("%w: %s", ErrBadOffsetRange, offsetsReadOnly)
	case len(c.Groups) != 0 || len(c.Topics) != 0:
		return fmt.Errorf("%w: client claims in a capability", ErrBadClaims)
	case len(c.Chain) > MaxChain:
		return fmt.Errorf("%w: chain of %d > %d", ErrBadClaims, len(c.Chain), MaxChain)
	case len(c.Tenant) > 255:
		return fmt.Errorf("%w: claim tnt: %d bytes > 255", ErrBadClaims, len(c.Tenant))
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

// b64 is the strict base64url of every segment capgate writes and of jti.
var b64 = base64.RawURLEncoding.Strict()

// validJTI: 128 bits, base64url without padding (22 characters).
func validJTI(s string) bool {
	if len(s) != 22 {
		return false
	}
	b, err := b64.DecodeString(s)
	return err == nil && len(b) == 16
}

// TopicRule says ValidTopic's rule (Kafka's) in words, for the CLI's
// refusals.
const TopicRule = `1 to 249 characters from a-z, A-Z, 0-9, '.', '_' and '-' (Kafka's rule), and not "." or ".."`

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

// NameRule says ValidName's rule in words, for the refusals that cite it
// (the coordinator's routes, the SDK, the CLI).
const NameRule = `1 to 255 printable ASCII characters from '!' to '~' (no space, no '/', nothing outside ASCII), and not "." or ".."`

// ValidName reports whether s is a legal group or holder name: 1 to 255
// printable ASCII characters without '/', and neither "." nor "..", so it
// fits in URL paths and keys.
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > 255 || s == "." || s == ".." {
		// "." and "..": a URL path drops them (RFC 3986 dot segments,
		// even escaped), so no route could ever name such a group or
		// member.
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c > '~' || c == '/' {
			return false
		}
	}
	return true
}
