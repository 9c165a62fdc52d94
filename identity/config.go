package identity

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/capgate/capgate/ocap"
)

// Algorithms a configured issuer may use.
var supportedAlgorithms = []string{"RS256", "ES256", "EdDSA"}

// Config is the coordinator's oidc section.
type Config struct {
	// Issuers are the IdPs whose tokens may join; none: only capgate's
	// own client credentials.
	Issuers []IssuerConfig `yaml:"issuers"`
	// JWKSRefreshMin: a token with an unknown kid refreshes its issuer's
	// keys at most this often.
	JWKSRefreshMin time.Duration `yaml:"jwks_refresh_min"`
	// JWKSCacheTTL: keys older than this are refreshed on next use.
	JWKSCacheTTL time.Duration `yaml:"jwks_cache_ttl"`
	// FetchTimeout bounds one key set fetch, discovery and key set
	// together (discovery at most half of it once it gave a jwks_uri, so
	// the key set is still read at that URL while discovery hangs).
	FetchTimeout time.Duration `yaml:"fetch_timeout"`
	// MaxJWKSBytes bounds a discovery document or key set.
	MaxJWKSBytes int `yaml:"max_jwks_bytes"`
	// MaxTokenBytes bounds a token before it is parsed.
	MaxTokenBytes int `yaml:"max_token_bytes"`
	// Leeway is the clock leeway on exp, nbf and iat.
	Leeway time.Duration `yaml:"leeway"`
	// MaxTokenLifetime bounds a token's exp - iat: a longer-lived token
	// (a leaked service-account token valid for years) is refused.
	MaxTokenLifetime time.Duration `yaml:"max_token_lifetime"`
}

// IssuerConfig is one IdP.
type IssuerConfig struct {
	// Issuer is the exact iss of its tokens (an https URL).
	Issuer string `yaml:"issuer"`
	// JWKSURL is the key set's https URL; empty: discovered from
	// <issuer>/.well-known/openid-configuration.
	JWKSURL string `yaml:"jwks_url"`
	// CAFile, when set, is a PEM bundle trusted for the IdP's HTTPS
	// (a private CA); empty: the system roots.
	CAFile string `yaml:"ca_file"`
	// Audiences: the token's aud must contain one of them.
	Audiences []string `yaml:"audiences"`
	// Algorithms the issuer signs with: RS256, ES256, EdDSA (default all).
	Algorithms []string `yaml:"algorithms"`
	// AuthorizedParties, when set, are the OAuth clients whose tokens
	// may join: the token's azp (the client it was issued to) must be
	// one of them, and a token without azp is refused. Empty: azp is not
	// looked at (aud alone binds the token to capgate).
	AuthorizedParties []string `yaml:"authorized_parties"`
	// SubjectClaim names the identity (default sub).
	SubjectClaim string `yaml:"subject_claim"`
	// Rules map claims to capgate groups and topics.
	Rules []Rule `yaml:"rules"`
	// ConsoleAdmins: a token whose claims match one of these may log in
	// to the operator's console as an admin (coordinator only; none: the
	// issuer's tokens never log in).
	ConsoleAdmins []Match `yaml:"console_admins"`
}

// Match names a claim (dotted path) and a value (exact, or a prefix
// ending in "*") a token's claim must hold.
type Match struct {
	Claim string `yaml:"claim"`
	Value string `yaml:"value"`
}

// Rule grants Groups and Topics to a token whose Claim holds Value, for
// Ops: a client credential's vocabulary (ocap.ParseClientOps), consume
// required; none: consume alone. With produce, the token may write
// through the gateway's Kafka listener to this rule's exactly named
// Topics, and to no other topic (Identity.ProduceTopics).
type Rule struct {
	Claim  string   `yaml:"claim"`
	Value  string   `yaml:"value"`
	Groups []string `yaml:"groups"`
	Topics []string `yaml:"topics"`
	Ops    []string `yaml:"ops"`
}

// maxRuleOps bounds a rule's ops list (there are two ops; repeats are
// allowed, not without end), as for a client credential.
const maxRuleOps = 8

// ops is what the rule grants; a rule that passed validate always
// parses (an unparsable one grants consume alone).
func (r Rule) ops() ocap.Ops {
	ops, err := ocap.ParseClientOps(r.Ops)
	if err != nil {
		return ocap.ClientOpsDefault
	}
	return ops
}

// validateOps checks the rule's ops under rp: each a known client op
// (the error names the entry, rp.ops[i]), consume among them, and
// produce only beside a topic this rule names exactly ("*" and prefix
// patterns grant consume only, as in a client credential).
func (r Rule) validateOps(rp string) error {
	if len(r.Ops) > maxRuleOps {
		return fmt.Errorf("%s.ops: at most %d entries (consume, produce), got %d", rp, maxRuleOps, len(r.Ops))
	}
	for i, name := range r.Ops {
		if _, err := ocap.ParseClientOps([]string{name}); err != nil {
			return fmt.Errorf("%s.ops[%d]: %w", rp, i, err)
		}
	}
	ops := r.ops()
	switch {
	case !ops.Has(ocap.OpConsume):
		return fmt.Errorf("%s.ops: consume is required (a rule's tokens join groups), got %q; add produce to also write", rp, r.Ops)
	case ops.Has(ocap.OpProduce) && !slices.ContainsFunc(r.Topics, ocap.IsExactName):
		return fmt.Errorf("%s.ops: produce needs a topic named exactly in this rule's topics (\"*\" and prefix patterns grant consume only), got topics %q", rp, r.Topics)
	}
	return nil
}

// Bounds of the settings.
const (
	// maxTokenLifetimeMax is the longest max_token_lifetime: capgate's
	// own credentials live at most client_credential_ttl_max (720h).
	maxTokenLifetimeMax = 720 * time.Hour
	// maxAuthorizedParties bounds an issuer's authorized_parties.
	maxAuthorizedParties = 256
)

// DefaultConfig has no issuers.
func DefaultConfig() Config {
	return Config{Issuers: []IssuerConfig{}, JWKSRefreshMin: 30 * time.Second, JWKSCacheTTL: time.Hour,
		FetchTimeout: 5 * time.Second, MaxJWKSBytes: 256 << 10, MaxTokenBytes: 16 << 10, Leeway: 2 * time.Second,
		MaxTokenLifetime: 24 * time.Hour}
}

// Validate names the first bad field under prefix ("oidc").
func (c Config) Validate(prefix string) error {
	switch {
	case c.JWKSRefreshMin <= 0 || c.JWKSCacheTTL <= 0 || c.FetchTimeout <= 0:
		return fmt.Errorf("%s.jwks_refresh_min, jwks_cache_ttl, fetch_timeout: must be > 0, got %s, %s, %s", prefix, c.JWKSRefreshMin, c.JWKSCacheTTL, c.FetchTimeout)
	case c.MaxJWKSBytes < 1024 || c.MaxTokenBytes < 1024:
		return fmt.Errorf("%s.max_jwks_bytes, max_token_bytes: must be >= 1024, got %d, %d", prefix, c.MaxJWKSBytes, c.MaxTokenBytes)
	case c.Leeway < 0 || c.Leeway > time.Minute:
		return fmt.Errorf("%s.leeway: must be within [0s, 1m], got %s", prefix, c.Leeway)
	case c.MaxTokenLifetime < time.Minute || c.MaxTokenLifetime > maxTokenLifetimeMax:
		return fmt.Errorf("%s.max_token_lifetime: must be within [1m, %s], got %s", prefix, maxTokenLifetimeMax, c.MaxTokenLifetime)
	}
	seen := map[string]bool{}
	for i, is := range c.Issuers {
		p := fmt.Sprintf("%s.issuers[%d]", prefix, i)
		if seen[is.Issuer] {
			return fmt.Errorf("%s.issuer: %q configured twice", p, is.Issuer)
		}
		seen[is.Issuer] = true
		if err := is.validate(p); err != nil {
			return err
		}
	}
	return nil
}

func (is IssuerConfig) validate(p string) error {
	if err := httpsURL(is.Issuer); err != nil {
		return fmt.Errorf("%s.issuer: %w", p, err)
	}
	if is.JWKSURL != "" {
		if err := httpsURL(is.JWKSURL); err != nil {
			return fmt.Errorf("%s.jwks_url: %w", p, err)
		}
	}
	if len(is.Audiences) == 0 || slices.Contains(is.Audiences, "") {
		return fmt.Errorf("%s.audiences: name at least one, none empty, got %q", p, is.Audiences)
	}
	if slices.Contains(is.AuthorizedParties, "") || len(is.AuthorizedParties) > maxAuthorizedParties {
		return fmt.Errorf("%s.authorized_parties: at most %d client ids, none empty, got %q", p, maxAuthorizedParties, is.AuthorizedParties)
	}
	for _, a := range is.Algorithms {
		if !slices.Contains(supportedAlgorithms, a) {
			return fmt.Errorf("%s.algorithms: want a subset of %v, got %q", p, supportedAlgorithms, a)
		}
	}
	if len(is.Rules) == 0 && len(is.ConsoleAdmins) == 0 {
		return fmt.Errorf("%s.rules: without a rule (or console_admins) no token of this issuer may do anything", p)
	}
	for j, r := range is.Rules {
		rp := fmt.Sprintf("%s.rules[%d]", p, j)
		if err := (Match{Claim: r.Claim, Value: r.Value}).validate(rp); err != nil {
			return err
		}
		if len(r.Groups) == 0 {
			return fmt.Errorf("%s.groups: name the groups it grants (exact, * or prefix*)", rp)
		}
		// The same patterns as a client credential's (ocap.ValidPattern):
		// a "*" anywhere but alone or at the end is no pattern.
		for _, g := range r.Groups {
			if !ocap.ValidPattern(g, ocap.ValidName) {
				return fmt.Errorf("%s.groups: %q: want a name, * or prefix* (\"*\" only at the end)", rp, g)
			}
		}
		for _, t := range r.Topics {
			if !ocap.ValidPattern(t, ocap.ValidTopic) {
				return fmt.Errorf("%s.topics: %q: want a topic name, * or prefix* (\"*\" only at the end)", rp, t)
			}
		}
		if err := r.validateOps(rp); err != nil {
			return err
		}
	}
	for j, m := range is.ConsoleAdmins {
		if err := m.validate(fmt.Sprintf("%s.console_admins[%d]", p, j)); err != nil {
			return err
		}
	}
	return nil
}

func (m Match) validate(p string) error {
	switch {
	case m.Claim == "" || strings.HasPrefix(m.Claim, ".") || strings.HasSuffix(m.Claim, ".") || strings.Contains(m.Claim, ".."):
		return fmt.Errorf("%s.claim: want a claim name or dotted path, got %q", p, m.Claim)
	case m.Value == "":
		return fmt.Errorf("%s.value: must not be empty (\"*\" matches any value)", p)
	}
	return nil
}

func httpsURL(raw string) error {
	u, err := url.Parse(raw)
	if err == nil && u.Scheme == "http" && u.Host != "" {
		// A dev IdP on http://localhost:8080 (Keycloak's default) was
		// "must be an https URL" and no more (newuser7).
		return fmt.Errorf("must be an https URL, got %q: the issuer's signing keys are fetched from it, and over plain http anyone on the path could hand the coordinator keys and mint tokens; serve the IdP over TLS (a private CA goes in ca_file)", raw)
	}
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || u.Fragment != "" {
		return fmt.Errorf("must be an https URL, got %q", raw)
	}
	return nil
}

// Errors of Verify, by what the caller answers.
var (
	// ErrExpired: the token verified but exp (plus leeway) passed.
	ErrExpired = errors.New("identity: token expired")
	// ErrUnmapped: the token verified but no rule grants it anything (for
	// ConsoleAdmin: no console_admins entry matches).
	ErrUnmapped = errors.New("identity: no mapping rule matches the token's claims")
	// ErrInvalid: anything else (signature, issuer, audience, algorithm,
	// kid, size, syntax); wrapped with the reason.
	ErrInvalid = errors.New("identity: token refused")
)

// Reason is a Verify or ConsoleAdmin error's message without the
// package's sentinel in front, for a caller that says "token refused"
// itself: "identity token refused: identity: token refused: …" said it
// twice.
func Reason(err error) string {
	msg := err.Error()
	for _, sentinel := range []error{ErrInvalid, ErrUnmapped} {
		msg = strings.TrimPrefix(msg, sentinel.Error()+": ")
	}
	return strings.TrimPrefix(msg, "identity: ")
}
