package coordinator

// Behavior: a JWT of an issuer configured under oidc.issuers stands in
// for a client credential at join (the bearer's unverified header typ,
// then its iss, pick the verifier: a token typed as capgate's own —
// capgate-client+jwt, capgate+jwt, capgate-member+jwt — always goes to
// capgate's verifier, and an IdP's issuer URL is never the coordinator's
// id). It is
// verified strictly by package identity (JWKS over HTTPS, cached,
// refreshed on an unknown kid at most once per oidc.jwks_refresh_min;
// RS256/ES256/EdDSA only; iss, aud, exp, nbf, iat) and its claims are
// mapped by the issuer's rules to the groups and topics it may join:
//   401 unauthorized    signature, issuer, audience, algorithm (HS*, none),
//                       unknown kid, malformed, oversized; a token whose
//                       iss is neither the coordinator's nor configured
//                       (auth.go unconfiguredIssuer: the message names the
//                       iss, and a configured one it misses by a trailing
//                       slash), never tried as a client credential; a
//                       capgate token of another iss is called what it
//                       is: "a capgate client credential of issuer X;
//                       this coordinator is Y: minted by another
//                       coordinator or cluster" (identity.CapgateKind)
//   401 token_expired   exp passed
//   403 forbidden       no rule maps the token, or the group or a topic
//                       is outside what the rules grant
//   409 capability_revoked  the identity was denied (its id, derived from
//                       issuer and subject, revoked like a jti)
// The member is bound to the identity (group.Credential: id, issuer,
// subject), so a refreshed token of the same subject rejoins it.

import (
	"context"
	"errors"

	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/identity"
	"github.com/capgate/capgate/internal/failguard"
	"github.com/capgate/capgate/ocap"
)

// identityTenantKey is the request's user value naming the IdP identity
// identityClaims verified, the tenant its answer counts for.
const identityTenantKey = "capgate.identity_tenant"

// identityClaims verifies an IdP token and returns it in the shape of a
// client credential's claims; on a refusal it answers and returns false.
func (c *Coordinator) identityClaims(ctx *fasthttp.RequestCtx, token []byte) (*ocap.Claims, bool) {
	now := c.now()
	t, err := c.authFailures.admit(budgetOf(ctx), token, now)
	if err != nil {
		writeTokenError(ctx, "identity token", err)
		return nil, false
	}
	verifyCtx, cancel := context.WithTimeout(context.Background(), c.cfg.OIDC.FetchTimeout)
	defer cancel()
	id, err := c.identities.Verify(verifyCtx, string(token), now)
	if err != nil && !errors.Is(err, identity.ErrUnmapped) { // unmapped: a good token the rules give nothing
		c.authFailures.rejected(t, now, err)
	} else if h, ok := failguard.Claimed(string(token)); ok {
		// Its holder as Admit reads it: the token's iss and sub claims
		// (an issuer's subject_claim may name another).
		c.authFailures.verified(t, h, now)
	}
	switch {
	case errors.Is(err, identity.ErrExpired):
		writeError(ctx, api.CodeTokenExpired, "identity token expired")
		return nil, false
	case errors.Is(err, identity.ErrUnmapped):
		// The reason names what the token holds in the claims the rules
		// read (identity.unmapped): the holder's own claims.
		writeError(ctx, api.CodeForbidden, "identity token maps to no capgate group (oidc rules): "+identity.Reason(err))
		return nil, false
	case err != nil:
		writeError(ctx, api.CodeUnauthorized, "identity token refused: "+identity.Reason(err))
		return nil, false
	}
	claims := &ocap.Claims{ID: id.ID, Issuer: id.Issuer, Subject: id.Subject, Groups: id.Groups, Topics: id.Topics,
		ExpiresAt: ocap.Seconds(id.ExpiresAt.Unix())}
	ctx.SetUserValue(identityTenantKey, id.ID) // its answer's holder (answerHolder)
	if c.revocations.refusal(claims, ocap.KindClient, c.now()) != nil {
		writeError(ctx, api.CodeCapabilityRevoked, "identity refused: denied")
		return nil, false
	}
	return claims, true
}
