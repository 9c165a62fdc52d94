package store

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/capgate/capgate/internal/secretfile"
)

// KEK is a key-encryption key: AES-256-GCM over the signing key ring
// before it reaches a shared log (DESIGN §7: private keys never reach Kafka
// in plaintext). Every replica of a cluster is given the same KEK.
//
// Envelope (the log value of the "keyring" key):
//
//	byte    envelope version (1)
//	string  KEK id (uvarint length + bytes): which KEK sealed it
//	12      random nonce
//	rest    AES-256-GCM ciphertext and tag of the stored value
//
// The additional data binds the envelope to its record: "capgate-kek/1",
// the KEK id and the record key, so an envelope moved to another key, or
// one whose KEK id was edited, fails to open.
type KEK struct {
	id   string
	aead cipher.AEAD
}

const (
	kekSize         = 32
	envelopeVersion = 1
)

// ErrKEK: a key-encryption key is missing, malformed, too exposed, or not
// the one that sealed a value.
var ErrKEK = errors.New("key-encryption key")

// NewKEK makes a KEK from 32 secret bytes. Its id is the first 8 bytes of
// SHA-256("capgate-kek-id" ‖ key), hex: it names the key without helping
// anyone guess it.
func NewKEK(key []byte) (*KEK, error) {
	if len(key) != kekSize {
		return nil, fmt.Errorf("%w: %d bytes, want %d", ErrKEK, len(key), kekSize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKEK, err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKEK, err)
	}
	sum := sha256.Sum256(append([]byte("capgate-kek-id"), key...))
	return &KEK{id: hex.EncodeToString(sum[:8]), aead: aead}, nil
}

// GenerateKEK returns the text of a new random KEK (base64), as a KEK file
// or variable holds it.
func GenerateKEK() string {
	key := make([]byte, kekSize)
	rand.Read(key)
	return base64.StdEncoding.EncodeToString(key)
}

// ParseKEK reads a KEK's text: 32 bytes as standard or URL base64 (padded
// or not) or as hex, surrounding white space ignored.
func ParseKEK(text string) (*KEK, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return nil, fmt.Errorf("%w: empty", ErrKEK)
	}
	for _, decode := range []func(string) ([]byte, error){
		hex.DecodeString,
		base64.StdEncoding.DecodeString, base64.RawStdEncoding.DecodeString,
		base64.URLEncoding.DecodeString, base64.RawURLEncoding.DecodeString,
	} {
		if key, err := decode(text); err == nil && len(key) == kekSize {
			return NewKEK(key)
		}
	}
	return nil, fmt.Errorf("%w: not 32 bytes of base64 or hex", ErrKEK)
}

// kekFileMax bounds a KEK file read (32 bytes of base64 or hex, a newline).
const kekFileMax = 4 << 10

// LoadKEKFile reads a KEK from a file that only its owner may read: a file
// with any group or other permission bit is refused, like an ssh key
// (internal/secretfile, the one rule for key files), the error naming
// the file, its mode and the fix (chmod 600).
func LoadKEKFile(path string) (*KEK, error) {
	text, err := secretfile.Read(path, kekFileMax)
	var mode *secretfile.ModeError
	switch {
	case errors.As(err, &mode):
		return nil, fmt.Errorf("%w: %w (others can read the key: chmod 600 %s)", ErrKEK, err, path)
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrKEK, err)
	}
	kek, err := ParseKEK(string(text))
	if err != nil {
		return nil, fmt.Errorf("file %s: %w", path, err)
	}
	return kek, nil
}

// LoadKEKEnv reads a KEK from the environment variable name.
func LoadKEKEnv(name string) (*KEK, error) {
	text, ok := os.LookupEnv(name)
	if !ok {
		return nil, fmt.Errorf("%w: environment variable %s is not set", ErrKEK, name)
	}
	kek, err := ParseKEK(text)
	if err != nil {
		return nil, fmt.Errorf("environment variable %s: %w", name, err)
	}
	return kek, nil
}

// ID names the KEK (not secret).
func (k *KEK) ID() string { return k.id }

func (k *KEK) additionalData(id string, recordKey []byte) []byte {
	return append([]byte("capgate-kek/1\x00"+id+"\x00"), recordKey...)
}

// seal wraps plaintext for the record with key recordKey.
func (k *KEK) seal(recordKey, plaintext []byte) []byte {
	e := &encoder{b: []byte{envelopeVersion}}
	e.string(k.id)
	nonce := make([]byte, k.aead.NonceSize())
	rand.Read(nonce)
	e.b = append(e.b, nonce...)
	return k.aead.Seal(e.b, nonce, plaintext, k.additionalData(k.id, recordKey))
}

// open unwraps an envelope sealed for recordKey.
func (k *KEK) open(recordKey, envelope []byte) ([]byte, error) {
	if len(envelope) == 0 || envelope[0] != envelopeVersion {
		return nil, fmt.Errorf("%w: not a sealed value (version byte)", ErrKEK)
	}
	d := &decoder{b: envelope[1:]}
	id := d.string()
	if d.err != nil || len(d.b) < k.aead.NonceSize()+k.aead.Overhead() {
		return nil, fmt.Errorf("%w: truncated envelope", ErrKEK)
	}
	if id != k.id {
		return nil, fmt.Errorf("%w: sealed with KEK %s, configured KEK is %s", ErrKEK, id, k.id)
	}
	nonce, sealed := d.b[:k.aead.NonceSize()], d.b[k.aead.NonceSize():]
	plain, err := k.aead.Open(nil, nonce, sealed, k.additionalData(id, recordKey))
	if err != nil {
		return nil, fmt.Errorf("%w: envelope fails authentication", ErrKEK)
	}
	return plain, nil
}

// String never shows key material.
func (k *KEK) String() string { return "KEK(" + k.id + ")" }

// GoString keeps %#v from printing the cipher state.
func (k *KEK) GoString() string { return k.String() }
