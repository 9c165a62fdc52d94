package sim

import (
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
	claims map[string]*ocap.Claims
	latest map[session.Partition]*ocap.Claims // the last one minted per partition
	next   uint64
}

func newTokens() *tokens {
	return &tokens{claims: map[string]*ocap.Claims{}, latest: map[session.Partition]*ocap.Claims{}}
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

// memberToken is the member token of a joined member.
func memberToken(member string) string { return "member:" + member }

// memberOf reads the member id back from a member token.
func memberOf(token string) (string, bool) { return strings.CutPrefix(token, "member:") }
