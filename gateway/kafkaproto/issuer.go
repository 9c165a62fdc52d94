package kafkaproto

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/capgate/capgate/identity"
	"github.com/capgate/capgate/ocap"
)

// issuerNames are the iss values of cfg's issuers.
func issuerNames(cfg identity.Config) []string {
	names := make([]string, 0, len(cfg.Issuers))
	for _, is := range cfg.Issuers {
		names = append(names, is.Issuer)
	}
	return names
}

// unconfiguredIssuer explains a refused token that is no capgate token
// (its JOSE typ is none of capgate's kinds) but a JWT naming an issuer
// the listener does not take (gateway.kafka_oidc.issuers): before, such
// a token — an IdP's, presented to a listener configured for another IdP
// or none — was refused in capgate's verifier's words ("typ \"JWT\" is
// no capgate token's", "malformed claims: unknown claim \"groups\""),
// which told someone wiring up their IdP nothing about issuers; the
// coordinator's join says the same (identity.Verifier.Unconfigured). The
// answer names the token's iss (at most 128 characters, quoted: nothing
// else of the token), a configured issuer it misses only by a trailing
// slash, or how many are configured and where — never their URLs, which
// an unauthenticated peer has no need of. nil for capgate's tokens
// (typ), configured issuers, and anything without an iss.
func unconfiguredIssuer(token string, issuers []string) error {
	iss, ok := foreignIssuer(token)
	if !ok {
		return nil
	}
	for _, is := range issuers {
		if is == iss {
			return nil
		}
	}
	for _, is := range issuers {
		if strings.TrimSuffix(is, "/") == strings.TrimSuffix(iss, "/") {
			return fmt.Errorf("issuer %.128q is not an OIDC issuer of this Kafka listener: it differs from the configured %.128q only by a trailing slash (gateway.kafka_oidc.issuers[].issuer must be the tokens' iss exactly)", iss, is)
		}
	}
	if len(issuers) == 0 {
		return fmt.Errorf("issuer %.128q is not an OIDC issuer of this Kafka listener (none is configured: gateway.kafka_oidc.issuers is empty, so it takes capgate's own tokens only)", iss)
	}
	return fmt.Errorf("issuer %.128q is not an OIDC issuer of this Kafka listener (not among the %d of gateway.kafka_oidc.issuers)", iss, len(issuers))
}

// foreignIssuer is the unverified iss of a JWT whose typ is no capgate
// kind (capgate writes its kind in every token it mints); false for
// anything else, a token over ocap.MaxTokenBytes included.
func foreignIssuer(token string) (string, bool) {
	if len(token) > ocap.MaxTokenBytes {
		return "", false
	}
	header, _, ok := strings.Cut(token, ".")
	if !ok {
		return "", false
	}
	var h struct {
		Typ any `json:"typ"`
	}
	if !decodeSegment(header, &h) {
		return "", false
	}
	if typ, ok := h.Typ.(string); ok && ocap.Kind(typ).Valid() {
		return "", false // capgate's own: never an IdP's
	}
	iss, ok := identity.UnverifiedIssuer([]byte(token)) // the coordinator's join reads it the same way
	return iss, ok && iss != ""
}

// decodeSegment decodes one base64url JSON segment of a JWT into v.
func decodeSegment(segment string, v any) bool {
	raw, err := base64.RawURLEncoding.DecodeString(segment)
	return err == nil && json.Unmarshal(raw, v) == nil
}
