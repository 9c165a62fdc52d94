package api

import "fmt"

// HeaderIdempotencyKey carries a join's key: the same on every attempt of
// one join, a new one for the next join (POST /v1/groups/{group}/join).
// A header, not a JoinRequest field: coordinators refuse unknown body
// fields, and the SDK cannot know a coordinator's version — one that
// predates keys ignores the header and joins as before. The name and the
// value's form are those of the IETF's Idempotency-Key draft
// (draft-ietf-httpapi-idempotency-key-header): a quoted string, or the
// bare value as many APIs take it.
const HeaderIdempotencyKey = "Idempotency-Key"

// JoinKeyMax bounds a join key's length, quotes not counted.
const JoinKeyMax = 128

// JoinKey reads a join's Idempotency-Key header lines (as sent): the key,
// "" when there is none, or a problem to answer 400 bad_request with — a
// key sent twice, empty, longer than JoinKeyMax, or with a character
// outside printable ASCII (! to ~) or a quote or backslash inside it.
func JoinKey(lines [][]byte) (key, problem string) {
	switch len(lines) {
	case 0:
		return "", ""
	case 1:
	default:
		return "", fmt.Sprintf("%s sent %d times: send one key per join", HeaderIdempotencyKey, len(lines))
	}
	v := lines[0]
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		v = v[1 : len(v)-1]
	}
	if len(v) == 0 || len(v) > JoinKeyMax {
		return "", fmt.Sprintf("%s of %d characters: a key is 1-%d printable ASCII characters (! to ~, no quote or backslash), optionally in double quotes", HeaderIdempotencyKey, len(v), JoinKeyMax)
	}
	for _, c := range v {
		if c < '!' || c > '~' || c == '"' || c == '\\' {
			return "", fmt.Sprintf("%s has %q: a key is 1-%d printable ASCII characters (! to ~, no quote or backslash), optionally in double quotes", HeaderIdempotencyKey, c, JoinKeyMax)
		}
	}
	return string(v), ""
}
