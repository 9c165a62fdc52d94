package identity

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/golang-jwt/jwt/v5"
	"go.uber.org/zap"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/ocap"
)

// Identity is a verified IdP token's holder and what it may join.
type Identity struct {
	// ID is stable per issuer and subject (128 bits of SHA-256,
	// base64url): the credential id members are bound to and admins deny.
	ID      string
	Issuer  string
	Subject string
	// Groups and Topics are patterns (exact, "*", "prefix*") granted by
	// the matching rules.
	Groups, Topics []string
	// Ops is the union of the matching rules' ops (consume always).
	Ops ocap.Ops
	// ProduceTopics are the topics the identity may write to: the
	// exactly named topics of the matching rules whose ops hold produce,
	// and only those. Another matching rule never widens them, neither
	// by a pattern nor by an exact name of its own: a consume-only rule
	// naming "payments" beside a produce rule naming "orders" lets the
	// token read both and write orders alone.
	ProduceTopics []string
	ExpiresAt     time.Time
}

// MayProduceTo reports whether the identity may write to topic: a
// matching rule with the produce op names it exactly.
func (id *Identity) MayProduceTo(topic string) bool {
	return slices.Contains(id.ProduceTopics, topic)
}

// ProducesAnywhere reports whether the identity may write to some topic.
func (id *Identity) ProducesAnywhere() bool { return len(id.ProduceTopics) > 0 }

// Verifier verifies tokens of the configured issuers.
type Verifier struct {
	cfg     Config
	issuers map[string]*issuer
}

type issuer struct {
	cfg  IssuerConfig
	keys *keySet
	algs []string
}

// New builds a verifier; no key is fetched until a token needs one.
func New(cfg Config, log *zap.Logger) (*Verifier, error) {
	if err := cfg.Validate("oidc"); err != nil {
		return nil, err
	}
	if log == nil {
		log = zap.NewNop()
	}
	v := &Verifier{cfg: cfg, issuers: map[string]*issuer{}}
	for _, is := range cfg.Issuers {
		ks, err := newKeySet(is, cfg, log)
		if err != nil {
			return nil, err
		}
		algs := is.Algorithms
		if len(algs) == 0 {
			algs = supportedAlgorithms
		}
		v.issuers[is.Issuer] = &issuer{cfg: is, keys: ks, algs: algs}
	}
	return v, nil
}

// Prefetch starts fetching every issuer's key set that has none yet, in
// the background: a process calls it at start so that an issuer it
// cannot reach (a private CA without ca_file, a wrong URL) is logged then
// (WARN "oidc: key set fetch failed", with a hint naming the setting),
// not at the first token. It uses no refresh interval: a token with an
// unknown kid after a failed prefetch fetches again.
func (v *Verifier) Prefetch(now time.Time) {
	if v == nil {
		return
	}
	for _, is := range v.issuers {
		is.keys.prefetch(now)
	}
}

// Handles reports whether token claims (unverified) to come from a
// configured issuer: then Verify decides, and capgate's own verifier is
// not consulted. Anything else (no issuer configured, not a JWT, another
// iss, a header typ of capgate's own token kinds: CapgateKind) is false.
func (v *Verifier) Handles(token []byte) bool {
	if v == nil || len(v.issuers) == 0 {
		return false
	}
	iss, ok := v.unverifiedIssuer(token)
	_, configured := v.issuers[iss]
	if !ok || !configured {
		return false
	}
	_, capgate := CapgateKind(token)
	return !capgate
}

// Unconfigured explains a token that Handles does not take although it
// names an issuer: its unverified iss is neither own (capgate's own
// issuer, whose tokens its own verifier checks) nor a configured one. It
// is nil for own's tokens, configured issuers' and anything without an
// iss. The header's typ is read first: a capgate token (CapgateKind) of
// another issuer was minted by another capgate coordinator or cluster,
// and is called so, never an unconfigured OIDC issuer's. Otherwise the
// answer names the token's iss (at most 128 characters, quoted) and,
// when it differs from a configured issuer only by a trailing slash
// (Auth0 and Okta write theirs with one), says so.
func (v *Verifier) Unconfigured(token []byte, own string) error {
	if v == nil {
		return nil
	}
	iss, ok := v.unverifiedIssuer(token)
	if !ok || iss == "" || iss == own {
		return nil
	}
	if kind, capgate := CapgateKind(token); capgate {
		return fmt.Errorf("%w: %s of issuer %.128q; this coordinator is %.128q: minted by another coordinator or cluster",
			ErrInvalid, kindNoun(kind), iss, own)
	}
	if _, configured := v.issuers[iss]; configured {
		return nil
	}
	for _, near := range []string{strings.TrimSuffix(iss, "/"), iss + "/"} {
		if _, ok := v.issuers[near]; ok && near != iss {
			return fmt.Errorf("%w: issuer %.128q is not a configured OIDC issuer: it differs from the configured %.128q only by a trailing slash (oidc.issuers[].issuer must be the tokens' iss exactly)",
				ErrInvalid, iss, near)
		}
	}
	if len(v.issuers) == 0 {
		return fmt.Errorf("%w: issuer %.128q is not a configured OIDC issuer (none is configured)", ErrInvalid, iss)
	}
	return fmt.Errorf("%w: issuer %.128q is not a configured OIDC issuer", ErrInvalid, iss)
}

// maxHeaderBytes bounds the JOSE header CapgateKind decodes (capgate's
// are under 100 bytes).
const maxHeaderBytes = 1024

// CapgateKind is the typ of token's JOSE header when it is one of
// capgate's own token kinds (ocap.KindClient, KindCapability,
// KindMember), read without verifying anything: it routes a token to
// capgate's verifier, never to an IdP's, and names it in a refusal. An
// IdP never writes these types. False for anything else, a header over
// maxHeaderBytes or no JWT.
func CapgateKind(token []byte) (ocap.Kind, bool) {
	header, _, ok := bytes.Cut(token, []byte("."))
	if !ok || len(header) > maxHeaderBytes {
		return "", false
	}
	raw, err := base64.RawURLEncoding.DecodeString(string(header))
	if err != nil {
		return "", false
	}
	var h struct {
		Typ string `json:"typ"`
	}
	if json.Unmarshal(raw, &h) != nil {
		return "", false
	}
	if k := ocap.Kind(h.Typ); k.Valid() {
		return k, true
	}
	return "", false
}

// kindNoun is what a capgate token kind is called in a refusal: "a
// capgate client credential".
func kindNoun(k ocap.Kind) string { return "a capgate " + strings.TrimPrefix(k.Noun(), "a ") }

// unverifiedIssuer is the iss claim of token, unverified; false when
// token is no JWT within max_token_bytes or has no string iss.
func (v *Verifier) unverifiedIssuer(token []byte) (string, bool) {
	if len(token) > v.cfg.MaxTokenBytes {
		return "", false
	}
	return UnverifiedIssuer(token)
}

// UnverifiedIssuer is the iss claim of a JWT, read without verifying
// anything: for naming an issuer in a refusal, never for trusting it.
// False when token is no three-segment JWT or has no string iss; bound
// token's size before calling.
func UnverifiedIssuer(token []byte) (string, bool) {
	parts := bytes.Split(token, []byte("."))
	if len(parts) != 3 {
		return "", false
	}
	payload, err := base64.RawURLEncoding.DecodeString(string(parts[1]))
	if err != nil {
		return "", false
	}
	var claims struct {
		Iss *string `json:"iss"`
	}
	if json.Unmarshal(payload, &claims) != nil || claims.Iss == nil {
		return "", false
	}
	return *claims.Iss, true
}

// Verify checks token strictly (see the package documentation) at now
// and maps its claims. Errors: ErrExpired, ErrUnmapped, or ErrInvalid
// wrapped with the reason.
func (v *Verifier) Verify(ctx context.Context, token string, now time.Time) (Identity, error) {
	is, claims, err := v.verify(ctx, token, now)
	if err != nil {
		return Identity{}, err
	}
	return is.identity(claims)
}

// ConsoleAdmin checks token strictly, as Verify does, and reports the
// identity when its claims match one of its issuer's console_admins
// (Groups and Topics are left empty: it is an operator, not a member).
// Errors: ErrExpired, ErrUnmapped (no console_admins entry matches), or
// ErrInvalid wrapped with the reason.
func (v *Verifier) ConsoleAdmin(ctx context.Context, token string, now time.Time) (Identity, error) {
	is, claims, err := v.verify(ctx, token, now)
	if err != nil {
		return Identity{}, err
	}
	id, err := is.subject(claims)
	if err != nil {
		return Identity{}, err
	}
	for _, m := range is.cfg.ConsoleAdmins {
		if matches(m.Claim, lookup(claims, m.Claim), m.Value) {
			return id, nil
		}
	}
	return Identity{}, is.notConsoleAdmin(claims)
}

// verify checks the token's signature and claims: golang-jwt's strict
// parser, then what its options cannot say (checkKeys before it,
// checkHeader in the key function, checkClaims after it).
func (v *Verifier) verify(ctx context.Context, token string, now time.Time) (*issuer, jwt.MapClaims, error) {
	fail := func(err error) (*issuer, jwt.MapClaims, error) { return nil, nil, err }
	if len(token) > v.cfg.MaxTokenBytes {
		return fail(fmt.Errorf("%w: larger than %d bytes", ErrInvalid, v.cfg.MaxTokenBytes))
	}
	if err := checkKeys(token); err != nil {
		return fail(err)
	}
	var unverified jwt.MapClaims
	if _, _, err := jwt.NewParser().ParseUnverified(token, &unverified); err != nil {
		return fail(fmt.Errorf("%w: %v", ErrInvalid, err))
	}
	iss, _ := unverified["iss"].(string)
	is, ok := v.issuers[iss]
	if !ok {
		return fail(fmt.Errorf("%w: issuer %q is not configured", ErrInvalid, iss))
	}
	claims := jwt.MapClaims{}
	parser := jwt.NewParser(jwt.WithValidMethods(is.algs), jwt.WithIssuer(is.cfg.Issuer), jwt.WithAudience(is.cfg.Audiences...),
		jwt.WithExpirationRequired(), jwt.WithIssuedAt(), jwt.WithLeeway(v.cfg.Leeway), jwt.WithStrictDecoding(),
		jwt.WithTimeFunc(func() time.Time { return now }))
	_, err := parser.ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) {
		if err := checkHeader(t.Header); err != nil {
			return nil, err
		}
		kid, _ := t.Header["kid"].(string)
		if kid == "" {
			return nil, errors.New("no kid")
		}
		k, err := is.keys.key(ctx, kid, now)
		if err != nil {
			return nil, err
		}
		if alg := t.Method.Alg(); alg != k.alg {
			return nil, fmt.Errorf("kid %q is a %s key, the token says %s", kid, k.alg, alg)
		}
		return k.key, nil
	})
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return fail(ErrExpired)
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return fail(fmt.Errorf("%w: %w", ErrInvalid, is.audienceRefusal(claims)))
	case err != nil:
		return fail(fmt.Errorf("%w: %v", ErrInvalid, err))
	}
	if err := is.checkClaims(claims, v.cfg.MaxTokenLifetime); err != nil {
		return fail(fmt.Errorf("%w: %w", ErrInvalid, err))
	}
	return is, claims, nil
}

// checkKeys refuses a token whose header or claims name a key twice
// (api.StrictJSON: exact names, compared unescaped): golang-jwt keeps the
// last of duplicates, other readers of the token (an audit pipeline, jq,
// the IdP's own introspection) the first, so the claims checked and
// mapped here would not be the ones they see. An IdP's claim set is
// open, so unknown claims are not refused. A segment that is not
// base64url JSON is left to golang-jwt, which refuses it in its words.
func checkKeys(token string) error {
	header, rest, _ := strings.Cut(token, ".")
	payload, _, _ := strings.Cut(rest, ".")
	for _, seg := range []struct{ name, b64 string }{{"header", header}, {"claims", payload}} {
		raw, err := base64.RawURLEncoding.Strict().DecodeString(seg.b64)
		var keys map[string]json.RawMessage
		if err != nil || json.Unmarshal(raw, &keys) != nil {
			continue
		}
		if err := api.StrictJSON(raw, &keys); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrInvalid, seg.name, err)
		}
	}
	return nil
}

// acceptedTypes are the header typ values of a token that may join (RFC
// 7519 §5.1 JWT; RFC 9068 §2.1 at+jwt, an OAuth access token), compared
// ignoring case as media types are (RFC 7515 §4.1.9). Any other typ is
// another kind of token — a refresh token, a logout token, a capgate
// token — and is refused.
var acceptedTypes = []string{"jwt", "at+jwt", "application/jwt", "application/at+jwt"}

// checkHeader is the header rules golang-jwt leaves to the caller: no
// crit (RFC 7515 §4.1.11: a token naming an extension as critical must be
// refused by a verifier that does not implement it, and capgate
// implements none) and, when present, a typ of acceptedTypes.
func checkHeader(h map[string]any) error {
	if crit, present := h["crit"]; present {
		return fmt.Errorf("header crit %.80v: capgate implements no JWS extension, so a token that makes one critical is refused (RFC 7515 §4.1.11)", crit)
	}
	typ, present := h["typ"]
	if !present {
		return nil
	}
	s, _ := typ.(string)
	if !slices.Contains(acceptedTypes, strings.ToLower(s)) {
		return fmt.Errorf("header typ %.40q: not an access or ID token's (want JWT or at+jwt)", fmt.Sprint(typ))
	}
	return nil
}

// maxSubjectBytes bounds the subject claim, as every capgate name.
const maxSubjectBytes = 255

// checkClaims is the claim rules golang-jwt's options cannot say: iat
// required (WithIssuedAt checks one that is present only), exp - iat at
// most maxLifetime, and azp among the issuer's authorized_parties when it
// names any. The subject's bound is checked where it is read (subject).
func (is *issuer) checkClaims(claims jwt.MapClaims, maxLifetime time.Duration) error {
	iat, err := claims.GetIssuedAt()
	if err != nil || iat == nil {
		return errors.New("no iat claim: a token must say when it was issued")
	}
	exp, _ := claims.GetExpirationTime() // required and checked by the parser
	if life := exp.Sub(iat.Time); life > maxLifetime {
		return fmt.Errorf("token lifetime (exp - iat) %s > oidc.max_token_lifetime %s", life, maxLifetime)
	}
	if len(is.cfg.AuthorizedParties) == 0 {
		return nil
	}
	azp, _ := claims["azp"].(string)
	if !slices.Contains(is.cfg.AuthorizedParties, azp) {
		return fmt.Errorf("azp %.80q is not among the issuer's authorized_parties", azp)
	}
	return nil
}

// subject is the identity of verified claims, without groups or topics.
func (is *issuer) subject(claims jwt.MapClaims) (Identity, error) {
	subClaim := is.cfg.SubjectClaim
	if subClaim == "" {
		subClaim = "sub"
	}
	sub, _ := lookup(claims, subClaim).(string)
	switch {
	case sub == "":
		return Identity{}, fmt.Errorf("%w: no %s claim", ErrInvalid, subClaim)
	case len(sub) > maxSubjectBytes:
		return Identity{}, fmt.Errorf("%w: claim %s: %d bytes > %d", ErrInvalid, subClaim, len(sub), maxSubjectBytes)
	case strings.ContainsFunc(sub, unicode.IsControl):
		return Identity{}, fmt.Errorf("%w: claim %s holds a control character", ErrInvalid, subClaim)
	}
	exp, _ := claims.GetExpirationTime()
	return Identity{ID: IdentityID(is.cfg.Issuer, sub), Issuer: is.cfg.Issuer, Subject: sub, ExpiresAt: exp.Time}, nil
}

// identity maps verified claims.
func (is *issuer) identity(claims jwt.MapClaims) (Identity, error) {
	id, err := is.subject(claims)
	if err != nil {
		return Identity{}, err
	}
	for _, r := range is.cfg.Rules {
		if !matches(r.Claim, lookup(claims, r.Claim), r.Value) {
			continue
		}
		id.Groups = appendNew(id.Groups, r.Groups...)
		id.Topics = appendNew(id.Topics, r.Topics...)
		ops := r.ops()
		id.Ops |= ops
		if ops.Has(ocap.OpProduce) {
			for _, t := range r.Topics {
				if ocap.IsExactName(t) {
					id.ProduceTopics = appendNew(id.ProduceTopics, t)
				}
			}
		}
	}
	if len(id.Groups) == 0 {
		return Identity{}, is.unmapped(claims)
	}
	return id, nil
}

// IdentityID is the stable credential id of (issuer, subject).
func IdentityID(issuer, subject string) string {
	sum := sha256.Sum256([]byte(issuer + "\x00" + subject))
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

// lookup follows a dotted path into the claims ("realm_access.roles").
func lookup(claims map[string]any, path string) any {
	var cur any = claims
	for _, part := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[part]
	}
	return cur
}

// matches reports whether the value of claim (a string, or an array of
// strings) holds pattern's value. Only the OAuth scope claims (scope,
// scp: space-delimited lists, RFC 6749 §3.3) are split on spaces; any
// other string is one value. Before, every string claim was split: a rule
// on a free-text claim (name, department) with value "finance" matched a
// token whose holder had set it to "marketing finance".
func matches(claim string, value any, pattern string) bool {
	var items []string
	switch v := value.(type) {
	case string:
		if spaceDelimited(claim) {
			items = strings.Fields(v)
		} else {
			items = []string{v}
		}
	case []any:
		for _, e := range v {
			if s, ok := e.(string); ok {
				items = append(items, s)
			}
		}
	}
	for _, item := range items {
		if ocap.PatternMatches(pattern, item) {
			return true
		}
	}
	return false
}

// spaceDelimited reports whether claim (a dotted path) is an OAuth scope
// claim, whose string value is a space-delimited list.
func spaceDelimited(claim string) bool {
	last := claim[strings.LastIndex(claim, ".")+1:]
	return last == "scope" || last == "scp"
}

func appendNew(list []string, items ...string) []string {
	for _, it := range items {
		found := false
		for _, have := range list {
			found = found || have == it
		}
		if !found {
			list = append(list, it)
		}
	}
	return list
}
