// Package idptest is an OpenID Connect issuer for tests: a real HTTPS
// server (its own CA) serving a discovery document and a JWKS, signing
// tokens with RS256, ES256 or EdDSA keys it can rotate, and counting the
// fetches. It can also misbehave on demand: an oversized, slow or held key set.
// Test support only; safe for concurrent use.
package idptest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Key is one signing key of the issuer.
type Key struct {
	Kid     string
	Alg     string // RS256, ES256, EdDSA
	private crypto.Signer
}

// Public is the key's public half.
func (k *Key) Public() crypto.PublicKey { return k.private.Public() }

// NewKey makes a key for alg.
func NewKey(kid, alg string) (*Key, error) {
	var priv crypto.Signer
	var err error
	switch alg {
	case "RS256":
		priv, err = rsa.GenerateKey(rand.Reader, 2048)
	case "ES256":
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "EdDSA":
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	default:
		err = fmt.Errorf("idptest: alg %q", alg)
	}
	return &Key{Kid: kid, Alg: alg, private: priv}, err
}

// Issuer is the test IdP.
type Issuer struct {
	Server *httptest.Server
	URL    string // the issuer (iss), https
	CAFile string // PEM of the server's certificate, for ca_file

	mu        sync.Mutex
	published []*Key // in the JWKS
	signing   *Key
	jwksBody  func() []byte // override (oversize)
	delay     time.Duration
	hold      chan struct{} // key set requests wait until it is closed; nil: none
	jwksPath  string        // where the key set is served and discovery points
	held      chan struct{} // a key set request started waiting on hold
	holdDisco chan struct{} // discovery requests wait until it is closed; nil: none

	JWKSFetches      atomic.Int64
	DiscoveryFetches atomic.Int64
}

// Start serves an issuer whose first key is a new key of alg; dir holds
// the CA file.
func Start(dir, alg string) (*Issuer, error) {
	is := &Issuer{}
	is.Server = httptest.NewTLSServer(http.HandlerFunc(is.serve))
	is.URL = is.Server.URL + "/realms/test"
	is.CAFile = filepath.Join(dir, "idp-ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: is.Server.Certificate().Raw})
	if err := os.WriteFile(is.CAFile, pemBytes, 0o600); err != nil {
		is.Server.Close()
		return nil, err
	}
	k, err := NewKey("k1", alg)
	if err != nil {
		is.Server.Close()
		return nil, err
	}
	is.published, is.signing, is.jwksPath = []*Key{k}, k, "/realms/test/certs"
	return is, nil
}

// New starts an issuer for t (alg of its first key), closed when t ends.
func New(t testing.TB, alg string) *Issuer {
	t.Helper()
	is, err := Start(t.TempDir(), alg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(is.Close)
	return is
}

// Close releases held requests and stops the server.
func (is *Issuer) Close() {
	is.release()
	is.Server.Close()
}

func (is *Issuer) serve(w http.ResponseWriter, r *http.Request) {
	is.mu.Lock()
	delay, body, hold, held, jwksPath, holdDisco := is.delay, is.jwksBody, is.hold, is.held, is.jwksPath, is.holdDisco
	is.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/realms/test/.well-known/openid-configuration":
		is.DiscoveryFetches.Add(1)
		if holdDisco != nil {
			select {
			case <-holdDisco:
			case <-r.Context().Done():
				return
			}
		}
		json.NewEncoder(w).Encode(map[string]string{"issuer": is.URL, "jwks_uri": is.Server.URL + jwksPath})
	case jwksPath:
		is.JWKSFetches.Add(1)
		if hold != nil {
			held <- struct{}{}
			select {
			case <-hold:
			case <-r.Context().Done():
				return
			}
		}
		if body != nil {
			w.Write(body())
			return
		}
		w.Write(is.JWKS())
	default:
		http.NotFound(w, r)
	}
}

// JWKS is the published key set.
func (is *Issuer) JWKS() []byte {
	is.mu.Lock()
	defer is.mu.Unlock()
	var keys []map[string]string
	for _, k := range is.published {
		keys = append(keys, JWK(k))
	}
	b, _ := json.Marshal(map[string]any{"keys": keys})
	return b
}

// JWK is k's public JWK.
func JWK(k *Key) map[string]string {
	enc := base64.RawURLEncoding.EncodeToString
	m := map[string]string{"kid": k.Kid, "alg": k.Alg, "use": "sig"}
	switch pub := k.Public().(type) {
	case *rsa.PublicKey:
		m["kty"], m["n"], m["e"] = "RSA", enc(pub.N.Bytes()), enc(big.NewInt(int64(pub.E)).Bytes())
	case *ecdsa.PublicKey:
		b, _ := pub.Bytes()
		m["kty"], m["crv"], m["x"], m["y"] = "EC", "P-256", enc(b[1:33]), enc(b[33:])
	case ed25519.PublicKey:
		m["kty"], m["crv"], m["x"] = "OKP", "Ed25519", enc(pub)
	}
	return m
}

// Rotate publishes a new key of alg and signs with it from now on; the
// old keys stay published when keepOld.
func (is *Issuer) Rotate(kid, alg string, keepOld bool) (*Key, error) {
	k, err := NewKey(kid, alg)
	if err != nil {
		return nil, err
	}
	is.mu.Lock()
	defer is.mu.Unlock()
	if !keepOld {
		is.published = nil
	}
	is.published = append(is.published, k)
	is.signing = k
	return k, nil
}

// MoveJWKS serves the key set at path from now on, and discovery names
// it there; the old path answers 404 (an IdP that moved its key set).
func (is *Issuer) MoveJWKS(path string) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.jwksPath = path
}

// SigningKey is the key tokens are signed with.
func (is *Issuer) SigningKey() *Key {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.signing
}

// ServeOversizedJWKS makes the key set n bytes of valid JSON.
func (is *Issuer) ServeOversizedJWKS(n int) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.jwksBody = func() []byte { return []byte(`{"keys":[],"pad":"` + strings.Repeat("x", n) + `"}`) }
}

// ServeJWKSBody makes the key set answer body (200, as given): an IdP
// that answers its key set wrongly, e.g. `{"keys":[]}` during maintenance.
func (is *Issuer) ServeJWKSBody(body string) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.jwksBody = func() []byte { return []byte(body) }
}

// ServeJWKS serves the key set as it is again (after ServeOversizedJWKS
// or ServeJWKSBody).
func (is *Issuer) ServeJWKS() {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.jwksBody = nil
}

// Delay makes every answer wait d (0: none).
func (is *Issuer) Delay(d time.Duration) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.delay = d
}

// HoldJWKS makes key set requests wait until release is called (or
// their client gives up): an IdP whose key set hangs, on demand. Each
// request that starts waiting sends on held (buffered 64; a test that
// holds more requests must read them).
func (is *Issuer) HoldJWKS() (held <-chan struct{}, release func()) {
	is.mu.Lock()
	defer is.mu.Unlock()
	if is.hold != nil {
		panic("idptest: HoldJWKS while a hold is on")
	}
	is.hold, is.held = make(chan struct{}), make(chan struct{}, 64)
	return is.held, is.release
}

// HoldDiscovery makes discovery requests wait until release is called
// (or their client gives up): an IdP whose discovery document hangs
// while its key set still answers.
func (is *Issuer) HoldDiscovery() (release func()) {
	is.mu.Lock()
	defer is.mu.Unlock()
	if is.holdDisco != nil {
		panic("idptest: HoldDiscovery while a hold is on")
	}
	is.holdDisco = make(chan struct{})
	return is.release
}

// release ends the holds, if any.
func (is *Issuer) release() {
	is.mu.Lock()
	defer is.mu.Unlock()
	if is.hold != nil {
		close(is.hold)
		is.hold = nil
	}
	if is.holdDisco != nil {
		close(is.holdDisco)
		is.holdDisco = nil
	}
}

// Claims are a token's claims; Token fills iss when empty.
type Claims = jwt.MapClaims

// Token signs claims with the signing key (iss defaults to the issuer).
func (is *Issuer) Token(claims Claims) string {
	return is.TokenWith(is.SigningKey(), claims)
}

// TokenWith signs claims with k, kid in the header.
func (is *Issuer) TokenWith(k *Key, claims Claims) string { return is.TokenAs(k, k.Kid, claims) }

// TokenAs signs claims with k but names kid in the header (a key of
// another type under that kid: algorithm confusion).
func (is *Issuer) TokenAs(k *Key, kid string, claims Claims) string {
	if _, ok := claims["iss"]; !ok {
		claims["iss"] = is.URL
	}
	method := jwt.GetSigningMethod(k.Alg)
	t := jwt.NewWithClaims(method, claims)
	t.Header["kid"] = kid
	s, err := t.SignedString(k.private)
	if err != nil {
		panic(err)
	}
	return s
}

// SignRaw signs headerJSON and claimsJSON, exactly as written (duplicate
// keys, a crit header, any typ), with the signing key: the tokens an
// attacker who controls nothing but the IdP's quirks would present.
func (is *Issuer) SignRaw(headerJSON, claimsJSON string) string {
	k := is.SigningKey()
	signing := base64.RawURLEncoding.EncodeToString([]byte(headerJSON)) + "." + base64.RawURLEncoding.EncodeToString([]byte(claimsJSON))
	sig, err := jwt.GetSigningMethod(k.Alg).Sign(signing, k.private)
	if err != nil {
		panic(err)
	}
	return signing + "." + base64.RawURLEncoding.EncodeToString(sig)
}
