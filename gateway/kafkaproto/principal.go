package kafkaproto

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/capgate/capgate/identity"
	"github.com/capgate/capgate/internal/failguard"
	"github.com/capgate/capgate/ocap"
)

// Principal is who a connection authenticated as.
type Principal struct {
	// Claims are the verified token's claims: a partition capability
	// (assign mode: the connection may use exactly that partition) or a
	// client credential (group mode; Produce only with its produce op, to
	// the topics it names exactly) or an IdP identity's in a client
	// credential's shape (Produce only as Identity's rules allow).
	Claims *ocap.Claims
	// Token is the token as presented; group joins hand it to the
	// coordinator as the member's client credential.
	Token string
	// Expires is when the token, hence the SASL session, ends.
	Expires time.Time
	// Identity is the IdP identity an IdP token mapped to (nil for
	// capgate's tokens): its rules' ops decide Produce
	// (Principal.mayProduceTo).
	Identity *identity.Identity
}

// capability reports whether the principal is a partition capability.
func (p *Principal) capability() bool { return p.Claims.Kind() == ocap.KindCapability }

// tenant is the holder a client principal stands for, as the coordinator
// counts it (coordinator.tenant, ocap.Claims.Tenant): what the members it
// opens here, their fetch rights (clientKey) and its connection budget
// (identityKey) belong to, which no other holder can present.
//   - a credential of the token endpoint (capgate's, sub
//     "oauth:<client_id>"): the OAuth client — its every token;
//   - an IdP identity: its id (issuer and subject, identity.IdentityID:
//     the IdP's sub is unique per issuer) — its every token;
//   - a credential an admin minted: that credential (its jti). Its sub is
//     a free label (--name): credentials named alike may serve different
//     holders, and keyed by name one holder read, re-authenticated into
//     and used up the connections of another's members (redteam7 #1).
//
// A capability's is its sub (a member id, unique; an admin grant's
// holder, which an operator names): it opens no members.
func (p *Principal) tenant() string {
	c := p.Claims
	switch {
	case p.capability():
		return c.Subject
	case c.Kind() == ocap.KindClient && strings.HasPrefix(c.Subject, oauthSubject):
		return c.Subject
	default:
		return c.ID
	}
}

// renewalProof is what a re-authentication from p to q presents to the
// coordinator beside q when it renews p's members (member.carryOver,
// api.JoinRequest.RenewCredential): p's token when both are admin-minted
// client credentials (each its own holder) with different ids and p
// still live — holding both proves one holder, which the member token
// alone does not. "" otherwise: an OAuth client's tokens and an IdP
// identity's renew without it, and an older coordinator refuses the
// field (400: the member is renewed anew, as without it).
func (p *Principal) renewalProof(q *Principal, now time.Time) string {
	adminMinted := func(x *Principal) bool {
		return x.Identity == nil && x.Claims.Kind() == ocap.KindClient && x.tenant() == x.Claims.ID
	}
	if !adminMinted(p) || !adminMinted(q) || p.Claims.ID == q.Claims.ID || !p.Expires.After(now) {
		return ""
	}
	return p.Token
}

// sameIdentity reports whether q may replace p on re-authentication
// (KIP-368): the same kind, issuer and subject, and for a capability the
// same group and partition. A renewed token (new jti, later expiry) is
// fine.
func (p *Principal) sameIdentity(q *Principal) bool {
	a, b := p.Claims, q.Claims
	if a.Kind() != b.Kind() || a.Issuer != b.Issuer || a.Subject != b.Subject {
		return false
	}
	if !p.capability() {
		return true
	}
	return a.Group == b.Group && a.Topic == b.Topic && a.PartitionNumber() == b.PartitionNumber()
}

// Authenticator checks the bearer token a client presents over SASL
// (OAUTHBEARER's token, or PLAIN's password). It is an interface so that
// identities from an external issuer can be added beside capgate's own
// tokens without touching the listener.
type Authenticator interface {
	Authenticate(token string, from netip.Addr, now time.Time) (*Principal, error)
}

// gateAuthenticator accepts capgate tokens, verified by the gateway: a
// partition capability, else a client credential (the JOSE typ tells them
// apart, so one can never stand in for the other). A refused JWT that is
// no capgate token and names an issuer other than issuers (the
// kafka_oidc ones) is refused saying so (unconfiguredIssuer), unless the
// refusal is the address's spent failure budget.
type gateAuthenticator struct {
	gate    Gate
	issuers []string
}

func (a gateAuthenticator) Authenticate(token string, from netip.Addr, now time.Time) (*Principal, error) {
	c, err := a.gate.VerifyCapability([]byte(token), from, now)
	if errors.Is(err, ocap.ErrBadType) {
		c, err = a.gate.VerifyClient(token, from, now)
	}
	if err != nil {
		if refusal := unconfiguredIssuer(token, a.issuers); refusal != nil && !errors.As(err, new(*failguard.Spent)) {
			return nil, refusal
		}
		return nil, err
	}
	return &Principal{Claims: c, Token: token, Expires: time.Unix(int64(c.ExpiresAt), 0)}, nil
}

// FailureBudget is a Gate's budget of failed verifications per client
// address, for tokens the gateway does not verify itself (an IdP's,
// idpAuthenticator): WithinBudget runs verify unless from's budget is
// spent (then a *failguard.Spent, unless the token's holder verified
// from from before and has failures of its own left), charges a failure
// (verify's false) to from, or remembers the token's holder (Claimed) as
// verified from from. The gateway's Gate has it; without it IdP tokens
// are checked unbudgeted (tests' fakes).
type FailureBudget interface {
	WithinBudget(token string, from netip.Addr, now time.Time, verify func() (bool, error)) error
}

// idpAuthenticator accepts, beside capgate's tokens, JWTs of the issuers
// configured under gateway.kafka_oidc (an organisation's IdP), verified
// by package identity exactly as the coordinator verifies them at join
// (JWKS over HTTPS, iss, aud, exp, nbf, algorithm and kid checks, the
// claim mapping). The principal's claims are the identity's: its id
// (denied like a jti), issuer, subject, and the groups and topics its
// rules grant; a group join hands the IdP token itself to the
// coordinator, which verifies it again and binds the member to the
// identity. A token whose unverified iss names no configured issuer goes
// to capgate's own verifier (refused there, an IdP-shaped one is refused
// naming its issuer: gateAuthenticator). An IdP token is checked within
// the address's budget of failed verifications, as capgate's tokens are
// (FailureBudget): before, a flood of forged IdP tokens over SASL was
// signature-checked without limit (redteam8 #2).
type idpAuthenticator struct {
	capgate  Authenticator
	gate     Gate
	verifier *identity.Verifier
	timeout  time.Duration // one JWKS fetch at most (kafka_oidc.fetch_timeout)
}

func (a idpAuthenticator) Authenticate(token string, from netip.Addr, now time.Time) (*Principal, error) {
	if !a.verifier.Handles([]byte(token)) {
		return a.capgate.Authenticate(token, from, now)
	}
	var id identity.Identity
	verify := func() (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), a.timeout)
		defer cancel()
		var err error
		id, err = a.verifier.Verify(ctx, token, now)
		// Unmapped: a good token the rules give nothing (not charged).
		return err == nil || errors.Is(err, identity.ErrUnmapped), err
	}
	var err error
	if b, ok := a.gate.(FailureBudget); ok {
		err = b.WithinBudget(token, from, now, verify)
	} else {
		_, err = verify()
	}
	if err != nil {
		return nil, err
	}
	c := &ocap.Claims{ID: id.ID, Issuer: id.Issuer, Subject: id.Subject, Groups: id.Groups, Topics: id.Topics,
		ExpiresAt: ocap.Seconds(id.ExpiresAt.Unix())}
	if code := a.gate.CheckClient(c, now); code != "" {
		return nil, fmt.Errorf("identity %s refused: %s", id.ID, code)
	}
	return &Principal{Claims: c, Token: token, Expires: id.ExpiresAt, Identity: &id}, nil
}
