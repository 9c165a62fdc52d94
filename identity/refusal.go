package identity

import (
	"fmt"
	"slices"
	"strings"

	"github.com/golang-jwt/jwt/v5"
)

// Bounds of what a refusal quotes from a token (the holder's own
// claims: its aud, the values of the claims the rules read).
const (
	refusalClaimsMax = 8  // distinct rule claims named
	refusalValuesMax = 8  // values quoted per claim
	refusalValueLen  = 64 // characters quoted per value
)

// audienceRefusal says why a signed token's aud was refused: what it
// holds and what the issuer accepts. golang-jwt says only "token has
// invalid audience", which on a first day (a Keycloak token's default
// aud is "account", Azure AD's the app id URI) leaves the operator
// guessing which side to change. Only a token that the issuer signed
// gets here (golang-jwt checks the signature before the claims), so
// naming the accepted audiences tells nobody outside the IdP anything.
func (is *issuer) audienceRefusal(claims jwt.MapClaims) error {
	aud, err := claims.GetAudience()
	held := "no aud"
	if err != nil {
		held = "an aud that is neither a string nor an array of strings"
	} else if len(aud) > 0 {
		held = "aud " + quoteList(aud)
	}
	return fmt.Errorf("token has %s, none of this issuer's audiences %s (oidc.issuers[].audiences): the IdP must put one of them in the token's aud",
		held, quoteList(is.cfg.Audiences))
}

// unmapped is ErrUnmapped with what the token holds in each claim the
// rules read, so the operator sees why no rule matched (a claim absent,
// a role under another path, a Keycloak group written as its full path
// "/kafka-billing"). The rules' own values are not quoted, except in the
// full-path hint, which names one only to a token that is in it.
func (is *issuer) unmapped(claims jwt.MapClaims) error {
	var parts []string
	var seen []string
	hint := ""
	for _, r := range is.cfg.Rules {
		if slices.Contains(seen, r.Claim) {
			continue
		}
		if len(seen) == refusalClaimsMax {
			parts = append(parts, "…")
			break
		}
		seen = append(seen, r.Claim)
		parts = append(parts, r.Claim+": "+describeClaim(r.Claim, lookup(claims, r.Claim)))
	}
	for _, r := range is.cfg.Rules {
		if hint == "" && !strings.HasPrefix(r.Value, "/") && matches(r.Claim, lookup(claims, r.Claim), "/"+r.Value) {
			hint = fmt.Sprintf("; %s holds %.64q, the full path of group %.64q (Keycloak's group mapper writes full paths by default): write the rule's value as %.64q, or turn off \"Full group path\"",
				r.Claim, "/"+r.Value, r.Value, "/"+r.Value)
		}
	}
	return fmt.Errorf("%w (the token holds %s%s)", ErrUnmapped, strings.Join(parts, "; "), hint)
}

// describeClaim quotes a claim's value as matches reads it.
func describeClaim(claim string, value any) string {
	switch v := value.(type) {
	case nil:
		return "absent"
	case string:
		if spaceDelimited(claim) {
			return quoteList(strings.Fields(v))
		}
		return quoteList([]string{v})
	case []any:
		items := make([]string, 0, len(v))
		for _, e := range v {
			if s, ok := e.(string); ok {
				items = append(items, s)
			}
		}
		return quoteList(items)
	}
	return "neither a string nor an array of strings"
}

// quoteList quotes at most refusalValuesMax items, each cut to
// refusalValueLen characters, and says how many more there are.
func quoteList(items []string) string {
	shown := items[:min(len(items), refusalValuesMax)]
	quoted := make([]string, len(shown))
	for i, s := range shown {
		quoted[i] = fmt.Sprintf("%.*q", refusalValueLen, s)
	}
	out := "[" + strings.Join(quoted, " ") + "]"
	if more := len(items) - len(shown); more > 0 {
		out += fmt.Sprintf(" and %d more", more)
	}
	return out
}
