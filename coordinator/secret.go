package coordinator

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
)

// GenerateSecret makes a fresh admin or sync bearer token (32 random bytes,
// base64url) and the hex SHA-256 digest to put in admin_token_hashes or
// sync_token_hashes.
func GenerateSecret() (token, hashHex string, err error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", fmt.Errorf("coordinator: generate secret: %w", err)
	}
	token = base64.RawURLEncoding.EncodeToString(b[:])
	return token, HashSecret(token), nil
}

// HashSecret is the hex SHA-256 digest of a bearer token, as configured.
func HashSecret(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// secretSet holds the digests of the accepted bearer tokens of one kind.
type secretSet struct {
	digests [][sha256.Size]byte
}

// newSecretSet decodes hex digests (already validated by Config).
func newSecretSet(hashes []string) secretSet {
	var s secretSet
	for _, h := range hashes {
		var d [sha256.Size]byte
		if b, err := hex.DecodeString(h); err == nil && len(b) == sha256.Size {
			copy(d[:], b)
			s.digests = append(s.digests, d)
		}
	}
	return s
}

// matches reports whether token hashes to one of the digests, comparing
// every digest in constant time.
func (s secretSet) matches(token []byte) bool {
	if len(token) == 0 {
		return false
	}
	sum := sha256.Sum256(token)
	found := 0
	for i := range s.digests {
		found |= subtle.ConstantTimeCompare(sum[:], s.digests[i][:])
	}
	return found == 1
}
