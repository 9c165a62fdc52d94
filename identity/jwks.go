package identity

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/capgate/capgate/tlsconf"
)

// Hand-written instead of a JWKS library (keyfunc, jwx): the key set must
// be fetched over HTTPS only with a private CA, bounded in time and bytes,
// without redirects, refreshed on unknown kid at most once per interval on
// the caller's clock, and imported strictly (RSA ≥ 2048, P-256, Ed25519,
// each key tied to one algorithm) — the parsing is ~80 lines of the
// standard library; the signature checks stay with golang-jwt.

// publicKey is one imported JWK: the key and the algorithm it serves.
type publicKey struct {
	key crypto.PublicKey
	alg string // RS256, ES256 or EdDSA: the only one this key verifies
}

// keySet is one issuer's cached keys. The lock guards the fields and is
// never held across a fetch: a lookup of a known kid answers from the
// current set at once, whatever a fetch in flight is doing (before, the
// lock was held across the download, so one token with a made-up kid
// made every lookup of the issuer wait up to fetch_timeout while the
// IdP was slow). Fetches run one at a time in a goroutine of their own;
// only the lookups that need the new set (an unknown kid) wait for it.
type keySet struct {
	issuer  string
	jwksURL string // the configured jwks_url; "": discovered at each fetch
	// discovered is the jwks_uri of the last discovery that worked; read
	// and written by the one fetch in flight.
	discovered string
	http       *http.Client
	maxBytes   int64
	refresh    time.Duration // minimum between fetches caused by unknown kids
	ttl        time.Duration
	timeout    time.Duration // one fetch, discovery and key set together
	log        *zap.Logger

	mu        sync.Mutex           // guards the fields below; never held across a fetch
	keys      map[string]publicKey // replaced whole by a fetch, never changed in place
	fetchedAt time.Time            // of the keys
	triedAt   time.Time            // of the last fetch started
	failed    bool                 // the last fetch that ended failed
	fetching  chan struct{}        // closed when the fetch in flight ends; nil: none
}

func newKeySet(is IssuerConfig, cfg Config, log *zap.Logger) (*keySet, error) {
	// The issuer's CA bundle is followed on disk (tlsconf.Client): a CA
	// the IdP rotates to is trusted by the next connection, no restart.
	tc, err := tlsconf.ClientConfig{CAFile: is.CAFile}.Client(log.Named("tls"))
	if err != nil {
		return nil, fmt.Errorf("identity: %s ca_file: %w", is.Issuer, err)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	tc.Apply(transport)
	transport.MaxIdleConnsPerHost = 1
	client := &http.Client{Transport: transport, Timeout: cfg.FetchTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return errors.New("redirects are not followed") }}
	return &keySet{issuer: is.Issuer, jwksURL: is.JWKSURL, http: client, maxBytes: int64(cfg.MaxJWKSBytes),
		refresh: cfg.JWKSRefreshMin, ttl: cfg.JWKSCacheTTL, timeout: cfg.FetchTimeout, log: log}, nil
}

// key returns the key of kid at now. A kid in the current set is
// answered at once; when the set is older than ttl a refresh starts
// beside (the stale set keeps serving until it lands). An unknown kid
// waits (up to ctx) for the fetch in flight, or starts one — but never
// two within refresh, so neither made-up kids nor an IdP that is down
// cost more than one fetch per interval.
func (s *keySet) key(ctx context.Context, kid string, now time.Time) (publicKey, error) {
	s.mu.Lock()
	k, known := s.keys[kid]
	due := s.fetching == nil && (s.triedAt.IsZero() || now.Sub(s.triedAt) >= s.refresh)
	if known {
		if due && now.Sub(s.fetchedAt) >= s.ttl {
			s.startFetch(now, true)
		}
		s.mu.Unlock()
		return k, nil
	}
	if due {
		s.startFetch(now, true)
	}
	done, failed := s.fetching, s.failed
	s.mu.Unlock()
	if done == nil {
		return publicKey{}, unknownKid(kid, failed)
	}
	select {
	case <-done:
	case <-ctx.Done():
		return publicKey{}, fmt.Errorf("unknown kid %.64q: the issuer's key set could not be fetched in time", kid)
	}
	s.mu.Lock()
	k, known = s.keys[kid]
	failed = s.failed
	s.mu.Unlock()
	if !known {
		return publicKey{}, unknownKid(kid, failed)
	}
	return k, nil
}

// unknownKid says why kid has no key: not in the issuer's set, or the set
// could not be fetched (the reason is logged, never answered: it names
// URLs and network errors of the IdP).
func unknownKid(kid string, fetchFailed bool) error {
	if fetchFailed {
		return fmt.Errorf("unknown kid %.64q: the issuer's key set could not be fetched", kid)
	}
	return fmt.Errorf("unknown kid %.64q", kid)
}

// startFetch starts the one fetch (s.mu held, none in flight); counted:
// it uses the refresh interval (a fetch a token caused), which the
// start's prefetch does not, so an IdP still starting when the
// coordinator did costs the first token no interval.
func (s *keySet) startFetch(now time.Time, counted bool) {
	done := make(chan struct{})
	s.fetching = done
	if counted {
		s.triedAt = now
	}
	go s.fetch(now, done)
}

// prefetch starts a fetch at start unless keys or a fetch exist: a
// misconfigured issuer (no ca_file for a private CA, a wrong URL) is
// logged when the process starts, not at the first user's token.
func (s *keySet) prefetch(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.keys == nil && s.fetching == nil {
		s.startFetch(now, false)
	}
}

// fetch replaces the keys with the issuer's current set; on failure the
// previous keys stay. It runs without s.mu, bounded by fetch_timeout.
func (s *keySet) fetch(now time.Time, done chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	keys, err := s.download(ctx)
	cancel()
	s.mu.Lock()
	s.fetching, s.failed = nil, err != nil
	hadKeys := s.keys != nil
	if err == nil {
		s.keys, s.fetchedAt = keys, now
	}
	s.mu.Unlock()
	defer close(done) // after the log line: a waiter that saw the failure finds it logged
	if err != nil {
		fields := []zap.Field{zap.String("issuer", s.issuer), zap.Error(err)}
		if hint := fetchHint(err); hint != "" {
			fields = append(fields, zap.String("hint", hint))
		}
		if !hadKeys {
			s.log.Warn("oidc: key set fetch failed; no keys yet: this issuer's tokens are refused until a fetch succeeds", fields...)
			return
		}
		s.log.Warn("oidc: key set fetch failed; keeping the previous keys", fields...)
		return
	}
	s.log.Info("oidc: key set fetched", zap.String("issuer", s.issuer), zap.Int("keys", len(keys)))
}

// fetchHint names the setting behind a fetch error an operator fixes in
// the config: an IdP certificate the process does not trust.
func fetchHint(err error) string {
	var unknown x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	switch {
	case errors.As(err, &unknown):
		return "the IdP's certificate is signed by a CA this process does not trust: set ca_file of this issuer (oidc.issuers[].ca_file) to that CA's PEM"
	case errors.As(err, &hostname):
		return "the IdP's certificate does not name the host of the issuer URL: check the issuer (and jwks_url) against the IdP's certificate"
	case errors.As(err, &invalid):
		return "the IdP's certificate is not valid (expired, or not for a server): check it, or ca_file of this issuer"
	}
	return ""
}

// keySetURL is where the key set is: the configured jwks_url, else the
// jwks_uri of the issuer's discovery document, read again at every fetch
// — fetches are bounded already (one per jwks_refresh_min for unknown
// kids, one per jwks_cache_ttl otherwise), and an IdP that moves its key
// set (a new realm URL, a CDN) is followed at the next one instead of
// needing a restart. When discovery fails, the last URL it gave is used
// (logged): an IdP whose discovery is down still serves its keys. With
// such a URL, discovery gets half of what is left of the fetch's
// timeout, so a discovery that hangs leaves the key set request the
// other half.
func (s *keySet) keySetURL(ctx context.Context) (string, error) {
	if s.jwksURL != "" {
		return s.jwksURL, nil
	}
	discoverCtx := ctx
	if deadline, ok := ctx.Deadline(); ok && s.discovered != "" {
		// The fallback needs time of its own: a discovery that hangs
		// spent the whole fetch_timeout, and the key set request then
		// went out with none left (TestKeySetFetchedWhileDiscoveryHangs).
		var cancel context.CancelFunc
		discoverCtx, cancel = context.WithTimeout(ctx, time.Until(deadline)/2)
		defer cancel()
	}
	url, err := s.discover(discoverCtx)
	switch {
	case err == nil:
		if s.discovered != "" && s.discovered != url {
			s.log.Info("oidc: the issuer's key set moved", zap.String("issuer", s.issuer), zap.String("from", s.discovered), zap.String("to", url))
		}
		s.discovered = url
	case s.discovered == "":
		return "", err
	default:
		s.log.Warn("oidc: discovery failed; fetching the key set from the URL it gave before", zap.String("issuer", s.issuer), zap.String("jwks_uri", s.discovered), zap.Error(err))
	}
	return s.discovered, nil
}

// discover reads the issuer's discovery document's jwks_uri.
func (s *keySet) discover(ctx context.Context) (string, error) {
	var disco struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := s.getJSON(ctx, strings.TrimSuffix(s.issuer, "/")+"/.well-known/openid-configuration", &disco); err != nil {
		return "", fmt.Errorf("discovery: %w", err)
	}
	if disco.Issuer != s.issuer {
		return "", fmt.Errorf("discovery: issuer %q, want %q", disco.Issuer, s.issuer)
	}
	if err := httpsURL(disco.JWKSURI); err != nil {
		return "", fmt.Errorf("discovery: jwks_uri %w", err)
	}
	return disco.JWKSURI, nil
}

func (s *keySet) download(ctx context.Context) (map[string]publicKey, error) {
	url, err := s.keySetURL(ctx)
	if err != nil {
		return nil, err
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := s.getJSON(ctx, url, &set); err != nil {
		return nil, fmt.Errorf("jwks: %w", err)
	}
	keys := map[string]publicKey{}
	for _, raw := range set.Keys {
		kid, k, err := importJWK(raw)
		if err != nil {
			s.log.Warn("oidc: key skipped", zap.String("issuer", s.issuer), zap.String("kid", kid), zap.Error(err))
			continue
		}
		keys[kid] = k
	}
	if len(keys) == 0 {
		// A set that names no key this process can use is an IdP (or a
		// proxy before it) answering wrongly — `{}` or `{"keys":[]}` from
		// a maintenance page — not an issuer that signs nothing: taking it
		// would refuse every token of this issuer until the next good
		// fetch. It fails the fetch, so the previous keys stay. An IdP
		// retiring a key publishes the set without it, which is taken.
		return nil, fmt.Errorf("jwks: no usable key in the set (%d entries)", len(set.Keys))
	}
	return keys, nil
}

// getJSON fetches an https URL (no redirects, fetch_timeout) and decodes
// at most maxBytes of JSON.
func (s *keySet) getJSON(ctx context.Context, url string, dst any) error {
	if err := httpsURL(url); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, s.maxBytes+1))
	if err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	if int64(len(b)) > s.maxBytes {
		return fmt.Errorf("%s: larger than max_jwks_bytes (%d)", url, s.maxBytes)
	}
	return json.Unmarshal(b, dst)
}

// jwk is the subset of RFC 7517/7518/8037 fields read.
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Alg string `json:"alg"`
	Crv string `json:"crv"`
	N   string `json:"n"`
	E   string `json:"e"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

// importJWK turns one JWK into a verification key tied to one algorithm.
func importJWK(raw json.RawMessage) (string, publicKey, error) {
	var j jwk
	if err := json.Unmarshal(raw, &j); err != nil {
		return "", publicKey{}, err
	}
	switch {
	case j.Kid == "":
		return "", publicKey{}, errors.New("no kid")
	case j.Use != "" && j.Use != "sig":
		return j.Kid, publicKey{}, fmt.Errorf("use %q is not sig", j.Use)
	}
	var k publicKey
	var err error
	switch j.Kty {
	case "RSA":
		k, err = rsaKey(j)
	case "EC":
		k, err = ecKey(j)
	case "OKP":
		k, err = okpKey(j)
	default:
		err = fmt.Errorf("kty %q not supported", j.Kty)
	}
	if err == nil && j.Alg != "" && j.Alg != k.alg {
		err = fmt.Errorf("alg %q does not fit a %s key", j.Alg, j.Kty)
	}
	return j.Kid, k, err
}

func b64(s string) ([]byte, error) { return base64.RawURLEncoding.Strict().DecodeString(s) }

func rsaKey(j jwk) (publicKey, error) {
	n, err1 := b64(j.N)
	e, err2 := b64(j.E)
	if err1 != nil || err2 != nil || len(e) == 0 || len(e) > 4 {
		return publicKey{}, errors.New("malformed RSA key")
	}
	key := &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
	if key.N.BitLen() < 2048 || key.E < 3 || key.E%2 == 0 {
		return publicKey{}, fmt.Errorf("RSA key of %d bits, exponent %d: want >= 2048 bits and an odd exponent >= 3", key.N.BitLen(), key.E)
	}
	return publicKey{key: key, alg: "RS256"}, nil
}

func ecKey(j jwk) (publicKey, error) {
	if j.Crv != "P-256" {
		return publicKey{}, fmt.Errorf("EC curve %q: want P-256", j.Crv)
	}
	x, err1 := b64(j.X)
	y, err2 := b64(j.Y)
	if err1 != nil || err2 != nil || len(x) != 32 || len(y) != 32 {
		return publicKey{}, errors.New("malformed P-256 key")
	}
	uncompressed := append(append([]byte{4}, x...), y...)
	key, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), uncompressed)
	if err != nil {
		return publicKey{}, fmt.Errorf("P-256 key: %w", err)
	}
	return publicKey{key: key, alg: "ES256"}, nil
}

func okpKey(j jwk) (publicKey, error) {
	x, err := b64(j.X)
	if j.Crv != "Ed25519" || err != nil || len(x) != ed25519.PublicKeySize {
		return publicKey{}, fmt.Errorf("OKP key: want an Ed25519 key, got crv %q", j.Crv)
	}
	return publicKey{key: ed25519.PublicKey(x), alg: "EdDSA"}, nil
}
