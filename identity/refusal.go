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
	return fmt.Errorf("token has %s, none of this issuer's audiences %s (its audiences: oidc.issuers[] on the coordinator, gateway.kafka_oidc.issuers[] on a gateway's Kafka listener): the IdP must put one of them in the token's aud",
		held, quoteList(is.cfg.Audiences))
}

// unmapped is ErrUnmapped with what the token holds in each claim the
// rules read, so the operator sees why no rule matched (a claim absent,
// a role under another path, a Keycloak group written as its full path
// "/kafka-billing"). The rules' own values are not quoted, except in the
// full-path hint, which names one only to a token that is in it.
func (is *issuer) unmapped(claims jwt.MapClaims) error {
	ms := make([]Match, len(is.cfg.Rules))
	for i, r := range is.cfg.Rules {
		ms[i] = Match{Claim: r.Claim, Value: r.Value}
	}
	return fmt.Errorf("%w (the token holds %s)", ErrUnmapped, unmatched(claims, ms))
}

// notConsoleAdmin is ErrUnmapped for a console login: the token matches
// none of console_admins, and what it holds in the claims they read.
func (is *issuer) notConsoleAdmin(claims jwt.MapClaims) error {
	return fmt.Errorf("%w: none of this issuer's console_admins (oidc.issuers[].console_admins) matches; the token holds %s",
		ErrUnmapped, unmatched(claims, is.cfg.ConsoleAdmins))
}

// unmatched says what claims hold in each claim ms read (at most
// refusalClaimsMax of them), and whether a group claim holds one of ms's
// values as a Keycloak full group path.
func unmatched(claims jwt.MapClaims, ms []Match) string {
	var parts, seen []string
	for _, m := range ms {
		if slices.Contains(seen, m.Claim) {
			continue
		}
		if len(seen) == refusalClaimsMax {
			parts = append(parts, "…")
			break
		}
		seen = append(seen, m.Claim)
		parts = append(parts, m.Claim+": "+describeClaim(m.Claim, lookup(claims, m.Claim)))
	}
	out := strings.Join(parts, "; ")
	for _, m := range ms {
		if !strings.HasPrefix(m.Value, "/") && matches(m.Claim, lookup(claims, m.Claim), "/"+m.Value) {
			return out + fmt.Sprintf("; %s holds %.64q, the full path of group %.64q (Keycloak's group mapper writes full paths by default): write the value as %.64q, or turn off \"Full group path\"",
				m.Claim, "/"+m.Value, m.Value, "/"+m.Value)
		}
	}
	return out
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
