package ocap

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Minter signs tokens with the current key of a key ring. Safe for
// concurrent use; SetRing swaps the ring after a rotation.
type Minter struct {
	check *Verifier // validates every token before it leaves (same rules)
	rand  io.Reader

	mu   sync.Mutex
	ring *KeyRing
}

// NewMinter makes a minter for cfg. rand is crypto/rand.Reader in
// production; tests may pass a seeded source.
func NewMinter(cfg VerifierConfig, ring *KeyRing, rand io.Reader) (*Minter, error) {
	if ring == nil || ring.Current == nil {
		return nil, errors.New("ocap: minter: key ring has no current key")
	}
	v, err := NewVerifier(cfg)
	if err != nil {
		return nil, err
	}
	return &Minter{check: v, rand: rand, ring: ring}, nil
}

// SetRing replaces the ring (after Rotate).
func (m *Minter) SetRing(ring *KeyRing) {
	m.mu.Lock()
	m.ring = ring
	m.mu.Unlock()
}

// NewJTI returns 128 random bits, base64url, never beginning with '-'.
// A jti is an argument on command lines (capgate admin revoke-capability
// JTI), where a leading '-' reads as a flag: one jti in 64 could not be
// revoked without "--", and the SDK's warning naming the command to run
// failed as printed. The first character encodes the top 6 bits of b[0];
// '-' is 62 (0b111110), which flipping the top bit turns into 30 ('e'):
// 1/64 of the values map onto others, 127.98 bits of entropy remain.
func (m *Minter) NewJTI() (string, error) {
	var b [16]byte
	if _, err := io.ReadFull(m.rand, b[:]); err != nil {
		return "", fmt.Errorf("ocap: jti: %w", err)
	}
	if b[0]>>2 == 62 {
		b[0] ^= 0x80
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// Mint signs claims as a token of kind, valid from now for ttl. It fills
// iss, aud, iat, nbf, exp and (when empty) jti, checks the result with the
// verifier's rules, and returns the token and the final claims. Its
// errors say why ("ocap: missing or malformed topic: …"), not that it was
// minting: every caller says what it minted ("mint grant: …"), and a
// second "mint:" only repeated it.
func (m *Minter) Mint(kind Kind, c Claims, now time.Time, ttl time.Duration) (string, *Claims, error) {
	if !kind.Valid() {
		return "", nil, fmt.Errorf("ocap: unknown token kind %.40q", string(kind))
	}
	if ttl < time.Second {
		return "", nil, fmt.Errorf("ocap: ttl %v below one second", ttl)
	}
	if kind == KindClient && c.Ops == ClientOpsDefault {
		c.Ops = 0 // the default is no claim: gateways of every version verify it
	}
	cfg := m.check.cfg
	c.Issuer, c.Audience = cfg.Issuer, cfg.Audience
	c.IssuedAt = Seconds(now.Unix())
	c.NotBefore = c.IssuedAt
	c.ExpiresAt = c.IssuedAt + Seconds(ttl/time.Second)
	if c.ID == "" {
		jti, err := m.NewJTI()
		if err != nil {
			return "", nil, err
		}
		c.ID = jti
	}
	m.mu.Lock()
	key := m.ring.Current
	m.mu.Unlock()
	c.kind, c.kid = kind, key.ID
	if err := m.check.checkClaims(&c, now); err != nil {
		return "", nil, err
	}
	token, err := sign(kind, key, &c)
	if err != nil {
		return "", nil, err
	}
	return token, &c, nil
}

func sign(kind Kind, key *Key, c *Claims) (string, error) {
	head, err := json.Marshal(struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
		Typ string `json:"typ"`
	}{"EdDSA", key.ID, string(kind)})
	if err != nil {
		return "", fmt.Errorf("ocap: encode header: %w", err)
	}
	body, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("ocap: encode claims: %w", err)
	}
	signing := b64.EncodeToString(head) + "." + b64.EncodeToString(body)
	sig, err := jwt.SigningMethodEdDSA.Sign(signing, key.Private)
	if err != nil {
		return "", fmt.Errorf("ocap: sign: %w", err)
	}
	token := signing + "." + b64.EncodeToString(sig)
	if len(token) > MaxTokenBytes {
		return "", fmt.Errorf("%w: %d bytes > %d", ErrTooLarge, len(token), MaxTokenBytes)
	}
	return token, nil
}
