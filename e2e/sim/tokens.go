package sim

import (
	"strconv"
	"strings"
	"time"

	"github.com/capgate/capgate/client/session"
	"github.com/capgate/capgate/coordinator/group"
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

// grantOps are the ops of a granted partition capability (as the
// coordinator mints them).
const grantOps = ocap.Ops(ocap.OpFetch | ocap.OpCommit)

// mint makes the capability of one grant at now, as the coordinator shell
// does: sub=holder, grp, tp, pt, ep, fetch+commit, iat=now, exp exactly
// the machine's expiry.
func (t *tokens) mint(g group.Grant, now time.Time) (string, *ocap.Claims) {
	t.next++
	partition := g.Partition
	c := &ocap.Claims{
		Issuer: "sim", Audience: "sim", Subject: g.Holder, ID: "jti-" + strconv.FormatUint(t.next, 10),
		IssuedAt: ocap.Seconds(now.Unix()), ExpiresAt: ocap.Seconds(g.ExpiresAt.Unix()),
		Group: g.Group, Topic: g.Topic, Partition: &partition, Epoch: g.Epoch, Ops: grantOps,
	}
	token := "cap-" + strconv.FormatUint(t.next, 10)
	t.claims[token] = c
	t.latest[session.Partition{Topic: g.Topic, Partition: g.Partition}] = c
	return token, c
}

// verify returns the claims of a capability, or nil for an unknown one.
func (t *tokens) verify(token string) *ocap.Claims { return t.claims[token] }

// memberToken is the member token of a joined member.
func memberToken(member string) string { return "member:" + member }

// memberOf reads the member id back from a member token.
func memberOf(token string) (string, bool) { return strings.CutPrefix(token, "member:") }
