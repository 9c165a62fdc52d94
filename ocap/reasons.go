package ocap

// The words of a refusal. A reason reaches people — a 401's message, a
// SASL error, `capgate token inspect` — so it says what is wrong in
// capgate's terms (which kind of token this is and which was wanted,
// which key, which claim, until when) and never golang-jwt's or
// encoding/json's wording ("token is unverifiable: error while executing
// keyfunc: …", "Go struct field Claims.pt of type int32"). Every reason
// still wraps exactly one sentinel of errors.go, so errors.Is keeps
// working for callers.

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Noun is what a kind of token is called ("a client credential").
func (k Kind) Noun() string {
	switch k {
	case KindCapability:
		return "a capability"
	case KindClient:
		return "a client credential"
	case KindMember:
		return "a member token"
	}
	return fmt.Sprintf("typ %.40q", string(k))
}

// typeError is the reason of a token whose typ is not the kind wanted.
func typeError(typ any, want Kind) error {
	s, isString := typ.(string)
	got := ""
	switch k := Kind(s); {
	case typ == nil:
		got = "no typ header"
	case !isString:
		got = fmt.Sprintf("typ is a %s, not a string", jsonKind(typ))
	case k.Valid():
		got = fmt.Sprintf("%s (typ %q)", k.Noun(), s)
	default:
		got = fmt.Sprintf("typ %.40q is no capgate token's", s)
	}
	return fmt.Errorf("%w: %s, want %s (typ %q)", ErrBadType, got, want.Noun(), string(want))
}

// jsonKind names a decoded JSON value's type: a number, a list, an object.
func jsonKind(v any) string {
	switch v.(type) {
	case float64, json.Number:
		return "number"
	case []any:
		return "list"
	case map[string]any:
		return "object"
	case bool:
		return "boolean"
	case nil:
		return "null"
	}
	return "string"
}

// ours finds, in err's chain, the error capgate built around sentinel s
// (the one whose text starts with s's): golang-jwt wraps the key
// function's and the claims decoder's errors in its own words.
func ours(err, s error) error {
	var found error
	var walk func(error) bool
	walk = func(e error) bool {
		if e == nil {
			return false
		}
		if errors.Is(e, s) && strings.HasPrefix(e.Error(), s.Error()) {
			found = e
			return true
		}
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			return walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, inner := range u.Unwrap() {
				if walk(inner) {
					return true
				}
			}
		}
		return false
	}
	if walk(err) {
		return found
	}
	return s
}

// malformed says what is wrong with a token that is not a JWS compact
// serialization capgate reads (golang-jwt says only "token is
// malformed"): its segments, their base64url, the header's JSON.
func malformed(token string) error {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return fmt.Errorf("%w: 3 dot-separated segments (header.claims.signature) expected, got %d", ErrMalformed, len(parts))
	}
	head, err := b64.DecodeString(parts[0])
	if err != nil {
		return fmt.Errorf("%w: the header segment is not unpadded base64url", ErrMalformed)
	}
	var h map[string]any
	if json.Unmarshal(head, &h) != nil {
		return fmt.Errorf("%w: the header is not a JSON object", ErrMalformed)
	}
	if _, err := b64.DecodeString(parts[1]); err != nil {
		return fmt.Errorf("%w: the claims segment is not unpadded base64url", ErrMalformed)
	}
	return ErrMalformed
}

// algorithmError is the reason of a token whose alg golang-jwt could not
// use: missing, not a string, or no algorithm it knows.
func algorithmError(t *jwt.Token) error {
	alg, present := t.Header["alg"]
	s, isString := alg.(string)
	switch {
	case !present:
		return fmt.Errorf("%w: no alg header", ErrBadAlgorithm)
	case !isString:
		return fmt.Errorf("%w: alg is a %s, not a string", ErrBadAlgorithm, jsonKind(alg))
	}
	return fmt.Errorf("%w: alg %.20q", ErrBadAlgorithm, s)
}

// signatureError is the reason of a token whose signature does not
// verify under the key its kid names.
func signatureError(t *jwt.Token) error {
	kid, _ := t.Header["kid"].(string)
	return fmt.Errorf("%w: the signature does not match the token under key %s (the token was altered, or signed with another key)", ErrBadSignature, kid)
}

// claimsJSONError says what is wrong with the claims' JSON in claim
// names: not JSON at all (golang-jwt's decoder), or api.StrictJSON's
// refusal (jwtClaims.UnmarshalJSON) in a token's words.
func claimsJSONError(err error) error {
	var syntaxErr *json.SyntaxError
	if errors.As(err, &syntaxErr) {
		return fmt.Errorf("%w: not valid JSON: %s", ErrBadClaims, syntaxErr.Error())
	}
	// api.StrictJSON's words are a request body's; in a token a key is a
	// claim: `duplicate claim "pt"`, `unknown claim "TP" (did you mean
	// "tp"?)`, `claim "pt": want an integer …`.
	for _, w := range [][2]string{{"duplicate key ", "duplicate claim "}, {"unknown field ", "unknown claim "}, {"field ", "claim "}} {
		if rest, ok := strings.CutPrefix(err.Error(), w[0]); ok {
			return fmt.Errorf("%w: %s%s", ErrBadClaims, w[1], rest)
		}
	}
	return fmt.Errorf("%w: %s", ErrBadClaims, strings.TrimPrefix(err.Error(), "json: "))
}

// secondsText is a claim's time as RFC 3339 (UTC).
func secondsText(s Seconds) string { return time.Unix(int64(s), 0).UTC().Format(time.RFC3339) }

// corruptBase64 reports whether err is a base64 decoding failure.
func corruptBase64(err error) bool {
	var corrupt base64.CorruptInputError
	return errors.As(err, &corrupt)
}
