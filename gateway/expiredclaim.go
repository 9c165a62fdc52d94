package gateway

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"github.com/capgate/capgate/ocap"
)

// expiredClaim is ocap.ErrExpired (worded as the verifier words it) when
// token's payload claims an exp that has passed at now with leeway —
// now ≥ exp + leeway, golang-jwt's own test, so a token the verifier
// would take is never refused here — and nil otherwise: no exp, a
// payload that does not decode, a token over ocap.MaxTokenBytes (the
// verifier refuses those itself). Nothing is verified: it only spares
// a token refused whatever its signature a signature check, and the
// caller's failure budget the charge. The key is matched exactly (not
// encoding/json's case-folding), so only "exp" is read.
func expiredClaim(token string, leeway time.Duration, now time.Time) error {
	if len(token) > ocap.MaxTokenBytes {
		return nil
	}
	_, rest, ok := bytes.Cut([]byte(token), []byte("."))
	if !ok {
		return nil
	}
	payload, _, ok := bytes.Cut(rest, []byte("."))
	if !ok {
		return nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(string(payload))
	if err != nil {
		return nil
	}
	var claims map[string]json.RawMessage
	if json.Unmarshal(raw, &claims) != nil {
		return nil
	}
	var exp ocap.Seconds
	if claims["exp"] == nil || json.Unmarshal(claims["exp"], &exp) != nil {
		return nil
	}
	if now.Before(time.Unix(int64(exp), 0).Add(leeway)) {
		return nil
	}
	return fmt.Errorf("%w: exp %s", ocap.ErrExpired, ocap.TimeText(exp, now))
}
