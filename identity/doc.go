// Package identity verifies JWTs of external OpenID Connect issuers (an
// organisation's IdP: Keycloak, Okta, Azure AD, …) and maps their claims
// to the capgate groups and topics their holder may join, so services can
// join with the tokens their IdP already issues, beside capgate's own
// client credentials.
//
// Per configured issuer: the key set comes from the issuer's discovery
// document (<issuer>/.well-known/openid-configuration → jwks_uri) or an
// explicit jwks_url, over HTTPS only, each fetch bounded in time
// (fetch_timeout) and size (max_jwks_bytes), no redirects. Keys are cached;
// a token whose kid is unknown triggers a refresh, at most once per
// jwks_refresh_min per issuer (a flood of made-up kids costs one fetch),
// and the set is refreshed anyway once older than jwks_cache_ttl; a
// failed refresh keeps the previous keys. A fetch never holds up a token
// whose kid is cached (the stale set serves while it refreshes): it runs
// alone, beside the lookups, and only tokens naming a kid the set lacks
// wait for it, up to their context.
//
// Verification (Verifier.Verify) goes through golang-jwt with strict
// options: a size cap before parsing, the issuer's algorithms only (a
// subset of RS256, ES256, EdDSA: never HS*, never none), the key chosen by
// kid and required to match the algorithm (an RSA key for RS256, a P-256
// key for ES256, an Ed25519 key for EdDSA; RSA ≥ 2048 bits) and the JWK's
// own alg when it names one, strict base64, iss equal to the configured
// issuer, aud containing one configured audience, exp required, nbf and
// iat honoured with the configured leeway. What its options cannot say is
// checked beside it: no header or claim key twice (api.StrictJSON; the
// claim set is open, so unknown claims pass), no crit header, a typ (when
// present) of JWT or at+jwt, iat required and exp - iat at most
// max_token_lifetime, azp among the issuer's authorized_parties when it
// names any, the subject at most 255 bytes without control characters.
//
// Mapping: each rule names a claim (a dotted path into the token's JSON,
// e.g. groups, scope, realm_access.roles, or a custom claim), a value
// (exact, or a prefix ending in "*"), and the capgate groups and topics
// (patterns: exact, "*" or "prefix*") it grants. A claim value may be a
// string or an array of strings; only the scope claims (scope, scp) are
// split on spaces, any other string is one value. The
// identity may join the union of what its matching rules grant; a token no
// rule matches is refused (ErrUnmapped).
//
// Ops: a rule may carry ops in a client credential's vocabulary
// (ocap.ParseClientOps: consume, required, and produce, only beside a
// topic the rule names exactly); none is consume alone. The identity's
// Ops are the union of its matching rules', but it may write only to
// ProduceTopics: the exact topics of the matching rules with produce.
// Its Topics unite every rule's, so deciding a write from them would let
// one rule's produce turn another rule's read-only names or patterns
// into write rights (least privilege: a rule grants writing to what it
// names itself, nothing more).
//
// The identity's ID is derived from issuer and subject (128 bits of their
// SHA-256, base64url): the same person or service is the same identity
// across token refreshes, and an admin denies it by that id like a jti.
//
// Safe for concurrent use.
package identity
