package cli_test

// Issue #13's token defects, against the built binary: `token inspect`
// exited 0 when verification failed, and the dev banner printed the admin
// token. (Expired-token errors showing raw epoch seconds has its e2e test
// in e2e/ops: TestExpiredTokenErrorsShowEpochSeconds.)

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/ocap"
)

// epochSeconds is a unix time in seconds of this century, as the expired
// token's message must not show it.
var epochSeconds = regexp.MustCompile(`\b1[0-9]{9}\b`)

// keyRing writes a new key ring with `capgate keys generate` and its JWK
// set with `capgate keys jwks`; it returns the ring (to mint with) and the
// JWKS file.
func keyRing(t *testing.T, dir, name string) (*ocap.KeyRing, string) {
	t.Helper()
	ringFile := filepath.Join(dir, name+".json")
	run(t, 20*time.Second, "", "keys", "generate", "--out", ringFile)
	jwksFile := filepath.Join(dir, name+".jwks.json")
	if err := os.WriteFile(jwksFile, []byte(run(t, 20*time.Second, "", "keys", "jwks", "--file", ringFile)), 0o600); err != nil {
		t.Fatal(err)
	}
	ring, err := ocap.LoadKeyRingFile(ringFile)
	if err != nil {
		t.Fatal(err)
	}
	return ring, jwksFile
}

// tokenClaims decodes a token's claims without verifying it.
func tokenClaims(t *testing.T, token string) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %d segments", len(parts))
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims map[string]any
	if err := json.Unmarshal(b, &claims); err != nil {
		t.Fatal(err)
	}
	return claims
}

// inspected is the part of `capgate token inspect`'s output these tests
// read.
type inspected struct {
	Claims      map[string]any `json:"claims"`
	Verified    *bool          `json:"verified"`
	VerifyError string         `json:"verify_error"`
}

func parseInspected(t *testing.T, out string) inspected {
	t.Helper()
	var got inspected
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("token inspect printed no JSON: %v\n%s", err, out)
	}
	return got
}

// TestTokenInspectExitsNonZeroWhenVerificationFails is issue #13's
// "`token inspect` exits 0 when verification fails": with --jwks, a token
// that does not verify — tampered, expired, or signed by a key the JWK
// set does not hold — makes `capgate token inspect` exit non-zero with
// the reason on stderr (the decoded token is still printed, marked
// verified:false); a valid token exits 0 with verified:true. The valid
// and the tampered token are capgate dev's own client credential checked
// against its coordinator's published JWKS.
func TestTokenInspectExitsNonZeroWhenVerificationFails(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := startDev(t, filepath.Join(dir, "dev"))
	creds := d.credentials(t)
	if creds.ClientCredential == "" {
		t.Fatal("credentials.json has no client_credential")
	}
	devJWKS := d.coordinator + "/.well-known/jwks.json"
	devClaims := tokenClaims(t, creds.ClientCredential)
	iss, _ := devClaims["iss"].(string)
	aud, _ := devClaims["aud"].(string)

	// A ring of our own (its JWKS in a file) and a foreign one.
	ring, ringJWKS := keyRing(t, dir, "ring")
	foreignRing, _ := keyRing(t, dir, "foreign")
	cfg := ocap.VerifierConfig{Issuer: iss, Audience: aud, Leeway: time.Second, MaxLease: time.Minute}
	minter, err := ocap.NewMinter(cfg, ring, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	foreignMinter, err := ocap.NewMinter(cfg, foreignRing, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p := int32(3)
	capability := ocap.Claims{Subject: "m", Topic: "demo", Partition: &p, Ops: ocap.Ops(ocap.OpFetch)}
	mint := func(m *ocap.Minter, now time.Time) string {
		t.Helper()
		tok, _, err := m.Mint(ocap.KindCapability, capability, now, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}

	// tampered: the dev credential with one claim changed, signature kept.
	parts := strings.Split(creds.ClientCredential, ".")
	devClaims["sub"] = "someone-else"
	payload, err := json.Marshal(devClaims)
	if err != nil {
		t.Fatal(err)
	}
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString(payload) + "." + parts[2]

	valid := []struct {
		name, token, kind, jwks string
	}{
		{"dev client credential", creds.ClientCredential, string(ocap.KindClient), devJWKS},
		{"capability of our ring", mint(minter, time.Now()), string(ocap.KindCapability), ringJWKS},
	}
	for _, tc := range valid {
		out := run(t, 20*time.Second, "", "token", "inspect", "--kind", tc.kind, "--jwks", tc.jwks, tc.token)
		if got := parseInspected(t, out); got.Verified == nil || !*got.Verified || got.VerifyError != "" {
			t.Errorf("%s: inspect printed %s, want verified:true", tc.name, out)
		}
	}

	invalid := []struct {
		name, token, kind, jwks, reason string
	}{
		{"tampered", tampered, string(ocap.KindClient), devJWKS, "bad signature"},
		{"foreign key", mint(foreignMinter, time.Now()), string(ocap.KindCapability), devJWKS, "unknown kid"},
		{"foreign key, our JWKS", mint(foreignMinter, time.Now()), string(ocap.KindCapability), ringJWKS, "unknown kid"},
		{"expired", mint(minter, time.Now().Add(-time.Hour)), string(ocap.KindCapability), ringJWKS, "token expired"},
	}
	for _, tc := range invalid {
		// runFailing fails the test on exit 0 (the bug) and on a hang.
		stdout, stderr := runFailing(t, 20*time.Second, "token", "inspect", "--kind", tc.kind, "--jwks", tc.jwks, tc.token)
		if !strings.Contains(stderr, "did not verify") || !strings.Contains(stderr, tc.reason) {
			t.Errorf("%s: stderr %q, want it to say the token did not verify: %s", tc.name, stderr, tc.reason)
		}
		got := parseInspected(t, stdout)
		if got.Verified == nil || *got.Verified || !strings.Contains(got.VerifyError, tc.reason) {
			t.Errorf("%s: inspect printed %s, want verified:false and %q", tc.name, stdout, tc.reason)
		}
		if got.Claims == nil {
			t.Errorf("%s: the claims were not printed: %s", tc.name, stdout)
		}
		if tc.name == "expired" && (!strings.Contains(stderr, "ago") || epochSeconds.MatchString(stderr)) {
			t.Errorf("expired: stderr %q, want the expiry as a time and how long ago, no epoch seconds", stderr)
		}
	}
	d.stop(true)
}

// TestDevBannerHidesAdminToken is issue #13's "the dev banner prints the
// admin token": `capgate dev` prints its banner and logs, and neither
// stdout nor stderr holds the admin token (nor the other secrets) it
// wrote to credentials.json (mode 0600) — the banner names that file
// instead. Checked on a fresh data directory (secrets made) and again
// after a restart on it (secrets loaded), through shutdown.
func TestDevBannerHidesAdminToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	credsPath := filepath.Join(dir, "credentials.json")
	for _, start := range []string{"fresh", "restart"} {
		d := startDev(t, dir)
		for _, name := range []string{"credentials.json", "credentials.env"} {
			info, err := os.Stat(filepath.Join(dir, name))
			if err != nil || info.Mode().Perm() != 0o600 {
				t.Fatalf("%s: %s mode %v (%v), want 0600", start, name, info.Mode().Perm(), err)
			}
		}
		creds := d.credentials(t)
		if creds.AdminToken == "" || creds.ClientCredential == "" || creds.SyncToken == "" {
			t.Fatalf("%s: credentials.json lacks a secret", start)
		}
		banner := d.stdout.String()
		if !strings.Contains(banner, credsPath) || !strings.Contains(banner, "admin_token") {
			t.Errorf("%s: the banner does not point to %s for the admin token:\n%s", start, credsPath, banner)
		}
		// The admin token works (so it is the one the stack uses), and
		// the output up to shutdown never shows it.
		if status := d.admin(t, http.MethodGet, "/v1/admin/groups", nil); status != http.StatusOK {
			t.Fatalf("%s: admin API with the token of credentials.json: %d", start, status)
		}
		d.stop(true)
		output := map[string]string{"stdout": d.stdout.String(), "stderr": d.stderr.String()}
		for stream, text := range output {
			for name, secret := range map[string]string{"admin token": creds.AdminToken, "client credential": creds.ClientCredential, "sync token": creds.SyncToken} {
				if strings.Contains(text, secret) {
					t.Errorf("%s: capgate dev's %s shows the %s:\n%s", start, stream, name, text)
				}
			}
		}
	}
}
