package sim

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/capgate/capgate/client/session"
	"github.com/capgate/capgate/ocap"
)

// tokens stands in for signing and verification: a minted capability is
// an opaque string naming claims kept here, so a gateway "verifies" by
// looking it up. Signatures are not what the simulation tests; expiry,
// epochs and holders are, and Decide sees the real *ocap.Claims.
type tokens struct {
	claims  map[string]*ocap.Claims
	latest  map[session.Partition]*ocap.Claims // the last one minted per partition
	members map[string]memberClaims            // member tokens with an exp (profile.memberTTL)
	next    uint64
}

// memberClaims are what a member token with an exp stands for.
type memberClaims struct {
	member string
	exp    time.Time
}

func newTokens() *tokens {
	return &tokens{claims: map[string]*ocap.Claims{}, latest: map[session.Partition]*ocap.Claims{}, members: map[string]memberClaims{}}
}

// simMinter stands in for the coordinator's signer (driver.Minter): the
// claims as ocap.Minter fills them (iss, aud, jti, iat=now, exp=now+ttl),
// kept under an opaque token; minted lists them in order.
type simMinter struct {
	tokens *tokens
	minted []*ocap.Claims
}

func (m *simMinter) Mint(_ ocap.Kind, c ocap.Claims, now time.Time, ttl time.Duration) (string, *ocap.Claims, error) {
	t := m.tokens
	t.next++
	c.Issuer, c.Audience, c.ID = "sim", "sim", "jti-"+strconv.FormatUint(t.next, 10)
	c.IssuedAt, c.ExpiresAt = ocap.Seconds(now.Unix()), ocap.Seconds(now.Add(ttl).Unix())
	claims := &c
	token := "cap-" + strconv.FormatUint(t.next, 10)
	t.claims[token] = claims
	t.latest[session.Partition{Topic: c.Topic, Partition: c.PartitionNumber()}] = claims
	m.minted = append(m.minted, claims)
	return token, claims, nil
}

// verify returns the claims of a capability, or nil for an unknown one.
func (t *tokens) verify(token string) *ocap.Claims { return t.claims[token] }

// memberToken is the member token of a joined member: with a ttl, one
// that expires ttl after now, shaped as a JWT (unsigned) so the SDK's
// driver reads its exp to time the renewal (driver.TokenExpiry), and
// kept here as a capability is; without, one that never expires.
func (t *tokens) memberToken(member string, now time.Time, ttl time.Duration) string {
	if ttl <= 0 {
		return "member:" + member
	}
	t.next++
	exp := time.Unix(now.Add(ttl).Unix(), 0) // whole seconds, as a JWT's exp
	payload, _ := json.Marshal(struct {
		Sub string `json:"sub"`
		Exp int64  `json:"exp"`
		JTI string `json:"jti"`
	}{member, exp.Unix(), "member-" + strconv.FormatUint(t.next, 10)})
	token := "eyJhbGciOiJub25lIn0." + base64.RawURLEncoding.EncodeToString(payload) + ".sim"
	t.members[token] = memberClaims{member: member, exp: exp}
	return token
}

// member reads the member id and exp (zero: none) back from a member
// token.
func (t *tokens) member(token string) (memberClaims, bool) {
	if c, ok := t.members[token]; ok {
		return c, true
	}
	id, ok := strings.CutPrefix(token, "member:")
	return memberClaims{member: id}, ok
}
