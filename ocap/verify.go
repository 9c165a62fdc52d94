package ocap

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"
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

// Verifier checks tokens strictly (DESIGN §3). Safe for concurrent use;
// keys are replaced atomically by SetKeys.
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

// Verify checks token as a token of kind at time now and returns its
// claims. Every failure is one of the package's sentinel errors.
func (v *Verifier) Verify(token string, kind Kind, now time.Time) (*Claims, error) {
	if len(token) > MaxTokenBytes {
		return nil, fmt.Errorf("%w: %d bytes > %d", ErrTooLarge, len(token), MaxTokenBytes)
	}
	head, payload, sig, err := split(token)
	if err != nil {
		return nil, err
	}
	kid, err := v.checkHeader(head, kind)
	if err != nil {
		return nil, err
	}
	if err := v.checkSignature(token[:len(head)+1+len(payload)], sig, kid); err != nil {
		return nil, err
	}
	c, err := decodeClaims(payload)
	if err != nil {
		return nil, err
	}
	c.kind, c.kid = kind, kid
	if err := v.checkClaims(c, now); err != nil {
		return nil, err
	}
	return c, nil
}

func split(token string) (head, payload, sig string, err error) {
	if strings.Count(token, ".") != 2 {
		return "", "", "", fmt.Errorf("%w: want 3 dot-separated segments", ErrMalformed)
	}
	head, rest, _ := strings.Cut(token, ".")
	payload, sig, _ = strings.Cut(rest, ".")
	if head == "" || payload == "" {
		return "", "", "", fmt.Errorf("%w: empty segment", ErrMalformed)
	}
	return head, payload, sig, nil
}

var b64 = base64.RawURLEncoding.Strict()

func decodeSegment(s, what string) ([]byte, error) {
	b, err := b64.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not canonical base64url: %v", ErrMalformed, what, err)
	}
	return b, nil
}

// forbiddenHeaders may redirect key lookup or demand semantics we do not
// implement; any other header than alg, kid, typ is refused as well.
var forbiddenHeaders = map[string]bool{"crit": true, "jku": true, "jwk": true, "x5u": true, "x5c": true, "x5t": true, "x5t#S256": true, "b64": true, "zip": true}

func (v *Verifier) checkHeader(seg string, kind Kind) (kid string, err error) {
	raw, err := decodeSegment(seg, "header")
	if err != nil {
		return "", err
	}
	var h map[string]json.RawMessage
	if err := json.Unmarshal(raw, &h); err != nil {
		return "", fmt.Errorf("%w: header: %v", ErrMalformed, err)
	}
	if alg, _ := headerString(h, "alg"); alg != "EdDSA" {
		return "", fmt.Errorf("%w: alg %.20q", ErrBadAlgorithm, alg)
	}
	for name := range h {
		if forbiddenHeaders[name] || (name != "alg" && name != "kid" && name != "typ") {
			return "", fmt.Errorf("%w: %.20q", ErrForbiddenHeader, name)
		}
	}
	if typ, _ := headerString(h, "typ"); typ != string(kind) {
		return "", fmt.Errorf("%w: typ %.40q, want %q", ErrBadType, typ, kind)
	}
	kid, ok := headerString(h, "kid")
	switch {
	case !ok:
		return "", ErrMissingKid
	case !ValidKeyID(kid):
		return "", fmt.Errorf("%w: %.70q", ErrBadKid, kid)
	}
	return kid, nil
}

func headerString(h map[string]json.RawMessage, name string) (string, bool) {
	raw, ok := h[name]
	if !ok {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

func (v *Verifier) checkSignature(signed, sigSeg, kid string) error {
	ks := v.keys.Load()
	pub, ok := ks.keys[kid]
	if !ok {
		if ks.retired[kid] {
			return fmt.Errorf("%w: %s", ErrKeyRetired, kid)
		}
		return fmt.Errorf("%w: %s", ErrUnknownKid, kid)
	}
	sig, err := b64.DecodeString(sigSeg)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return fmt.Errorf("%w: signature is not %d canonical base64url bytes", ErrBadSignature, ed25519.SignatureSize)
	}
	if !ed25519.Verify(pub, []byte(signed), sig) {
		return ErrBadSignature
	}
	return nil
}

func decodeClaims(seg string) (*Claims, error) {
	raw, err := decodeSegment(seg, "payload")
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var c Claims
	if err := dec.Decode(&c); err != nil {
		for _, sentinel := range []error{ErrBadTime, ErrUnknownOp, ErrBadOffsetRange, ErrBadClaims} {
			if errors.Is(err, sentinel) {
				return nil, err
			}
		}
		return nil, fmt.Errorf("%w: %v", ErrBadClaims, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data", ErrBadClaims)
	}
	return &c, nil
}
