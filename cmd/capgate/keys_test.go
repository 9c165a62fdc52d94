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
	before, _ := ocap.LoadKeyRingFile(file)
	if _, err := run(t, "keys", "rotate", "--file", file); err != nil {
		t.Fatal(err)
	}
	after, _ := ocap.LoadKeyRingFile(file)
	if after.Current.ID != before.Next.ID || after.Previous.ID != before.Current.ID {
		t.Fatal("rotate did not promote next and keep current as previous")
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
	// Tampered: decoded, not verified, reason given.
	out, _ = run(t, "token", "inspect", "--jwks", jwksFile, tok[:len(tok)-3]+"AAA")
	if !strings.Contains(out, `"verified": false`) || !strings.Contains(out, "signature") {
		t.Fatalf("tampered inspect = %s", out)
	}
}
