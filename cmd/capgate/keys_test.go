package main

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/ocap"
	"github.com/capgate/capgate/store"
)

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestKeysGenerateRotateInspect(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "keys.json")
	if _, err := run(t, "keys", "generate", "--out", file); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(file); st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", st.Mode().Perm())
	}
	if _, err := run(t, "keys", "generate", "--out", file); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("overwrote an existing ring: %v", err)
	}
	after, err := ocap.LoadKeyRingFile(file)
	if err != nil {
		t.Fatal(err)
	}
	jwks, err := run(t, "keys", "jwks", "--file", file)
	if err != nil {
		t.Fatal(err)
	}
	jwksFile := filepath.Join(dir, "jwks.json")
	os.WriteFile(jwksFile, []byte(jwks), 0o600)

	cfg := ocap.VerifierConfig{Issuer: "c1", Audience: "dev", Leeway: time.Second, MaxLease: time.Minute}
	m, err := ocap.NewMinter(cfg, after, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p := int32(2)
	tok, _, err := m.Mint(ocap.KindCapability, ocap.Claims{Subject: "m", Topic: "orders", Partition: &p, Ops: ocap.Ops(ocap.OpFetch)}, time.Now(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	out, err := run(t, "token", "inspect", "--jwks", jwksFile, tok)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if got["verified"] != true || got["claims"].(map[string]any)["tp"] != "orders" {
		t.Fatalf("inspect = %s", out)
	}
	// Tampered: decoded, not verified, reason given, and an error (exit
	// status 1) — issue #13: it exited 0.
	out, err = run(t, "token", "inspect", "--jwks", jwksFile, tok[:len(tok)-3]+"AAA")
	if !strings.Contains(out, `"verified": false`) || !strings.Contains(out, "signature") {
		t.Fatalf("tampered inspect = %s", out)
	}
	if err == nil || !strings.Contains(err.Error(), "did not verify") {
		t.Fatalf("tampered inspect returned %v, want a verification error", err)
	}
}

// TestKeysRotateThroughAdminAPI rotates a real coordinator's ring: the
// JWKS then holds the old current key as previous and a new next key.
func TestKeysRotateThroughAdminAPI(t *testing.T) {
	base, admin := startCoordinator(t)
	before := fetchJWKS(t, base)
	out, err := run(t, "keys", "rotate", "--coordinator", base, "--token", admin)
	if err != nil {
		t.Fatalf("rotate: %v\n%s", err, out)
	}
	var ids struct{ Current, Next, Previous string }
	if err := json.Unmarshal([]byte(out), &ids); err != nil {
		t.Fatalf("rotate printed %q: %v", out, err)
	}
	after := fetchJWKS(t, base)
	if len(after) != 3 || !after[ids.Previous] || !after[ids.Current] || !after[ids.Next] || before[ids.Next] {
		t.Fatalf("jwks before %v after %v, rotate said %+v", before, after, ids)
	}
	if _, err := run(t, "keys", "rotate", "--coordinator", base, "--token", "wrong"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("rotate with a wrong admin token: %v", err)
	}
}

// keys kek writes a 0600 key the coordinator's Kafka state accepts, and
// never replaces an existing one.
func TestKeysKEK(t *testing.T) {
	file := filepath.Join(t.TempDir(), "kek.key")
	out, err := run(t, "keys", "kek", "--out", file)
	if err != nil || !strings.Contains(out, "KEK id") {
		t.Fatalf("keys kek: %q, %v", out, err)
	}
	if st, _ := os.Stat(file); st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", st.Mode().Perm())
	}
	if _, err := store.LoadKEKFile(file); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, "keys", "kek", "--out", file); err == nil {
		t.Fatal("replaced an existing KEK")
	}
}
