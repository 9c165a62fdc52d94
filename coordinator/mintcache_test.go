package coordinator_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// TestMintedClaimsAreTheVerifiedOnes: every capability a join's answer
// carries is in the verified-token cache when the answer arrives, under
// exactly the claims verifying its bytes gives (grants.go mintedCache):
// the release or commit that presents it costs no signature check, and
// a cache hit says nothing a full verification would not. Fails without
// mintedCache: nothing minted is cached until it is first presented.
func TestMintedClaimsAreTheVerifiedOnes(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 4})
	h := e.start(t)
	a := h.join(t, "g", h.clientCredential(t, []string{"g"}, []string{"orders"}), api.JoinRequest{Topics: []string{"orders"}})
	if len(a.grants) != 4 {
		t.Fatalf("%d grants, want 4", len(a.grants))
	}
	for _, g := range a.grants {
		cached, ok := coordinator.CachedClaims(h.c, g.Capability)
		if !ok {
			t.Fatalf("the capability of %s/%d is not cached when its answer arrives", g.Topic, g.Partition)
		}
		verified, err := coordinator.VerifyUncached(h.c, g.Capability)
		if err != nil {
			t.Fatalf("%s/%d: %v", g.Topic, g.Partition, err)
		}
		if !reflect.DeepEqual(cached, verified) {
			t.Fatalf("%s/%d: cached claims %+v, verified %+v", g.Topic, g.Partition, cached, verified)
		}
	}
}

// TestMintedCapabilitiesStayStrict: with the coordinator's own
// capabilities cached at mint, a commit still refuses whatever is not one
// of them byte for byte, or is one no longer good: its signature forged
// (another key under the same kid), its payload edited under the genuine
// signature, denied by an administrator, fenced by a handoff, expired.
// The genuine one commits.
func TestMintedCapabilitiesStayStrict(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 2})
	now, advance := testClock()
	h := e.start(t, coordinator.WithClock(now))
	cred := h.clientCredential(t, []string{"g"}, []string{"orders"})
	a := h.join(t, "g", cred, api.JoinRequest{Topics: []string{"orders"}, SessionTimeoutMs: 300_000})
	g0, ok0 := a.grant("orders", 0)
	g1, ok1 := a.grant("orders", 1)
	if !ok0 || !ok1 {
		t.Fatal("the join granted not both partitions")
	}
	if _, ok := coordinator.CachedClaims(h.c, g0.Capability); !ok {
		t.Fatal("the minted capability is not cached: this test would check nothing the cache does")
	}
	commit := func(capability string) (int, api.Code) {
		t.Helper()
		status, body, _ := h.do(t, "POST", "/v1/groups/g/commit", a.token, api.CommitRequest{Offsets: []api.CommitOffset{
			{Topic: "orders", Partition: 0, Offset: 0, Capability: capability}}})
		if status == 200 {
			return status, ""
		}
		return status, errorCode(t, body)
	}

	if status, code := commit(resigned(t, g0.Capability)); status != 401 {
		t.Fatalf("a capability with its claims signed by another key under the same kid: %d %s, want 401", status, code)
	}
	if status, code := commit(editedPayload(t, g0.Capability)); status != 401 {
		t.Fatalf("a capability with its payload edited under the genuine signature: %d %s, want 401", status, code)
	}
	if status, code := commit(g1.Capability); status != 403 {
		t.Fatalf("a genuine cached capability of another partition: %d %s, want 403", status, code)
	}
	if status, code := commit(g0.Capability); status != 200 {
		t.Fatalf("the genuine capability: %d %s, want 200", status, code)
	}

	jti := claimsOf(t, g0.Capability)["jti"].(string)
	h.call(t, "POST", "/v1/admin/capabilities/"+jti+"/revoke", e.adminToken, coordinator.DenyRequest{}, 200, nil)
	if status, code := commit(g0.Capability); status != 409 || code != api.CodeCapabilityRevoked {
		t.Fatalf("a denied capability: %d %s, want 409 capability_revoked", status, code)
	}

	// A second member: orders/1 moves to it; a's capability of it is fenced.
	b := h.join(t, "g", cred, api.JoinRequest{Topics: []string{"orders"}, SessionTimeoutMs: 300_000})
	moved := a.heartbeat(t, 2000)
	if len(moved.Revoke) != 1 {
		t.Fatalf("a was revoked %v, want one partition", moved.Revoke)
	}
	a.releaseAll(t, moved.Revoke, func(api.PartitionRef) int64 { return -1 })
	for deadline := time.Now().Add(30 * time.Second); len(b.grants) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("b never got the moved partition")
		}
		b.heartbeat(t, 2000)
	}
	for _, bg := range b.grants {
		old, _ := a.grant(bg.Topic, bg.Partition)
		status, body, _ := h.do(t, "POST", "/v1/groups/g/commit", a.token, api.CommitRequest{Offsets: []api.CommitOffset{
			{Topic: bg.Topic, Partition: bg.Partition, Offset: 0, Capability: old.Capability}}})
		if status == 200 {
			t.Fatalf("a's fenced capability of %s/%d still commits", bg.Topic, bg.Partition)
		}
		_ = body
	}

	advance(2 * time.Minute) // past every capability's exp (capability_lease 60s) + leeway; the member token and its credential live on
	kept := b.grants[partitionKey(moved.Revoke[0].Topic, moved.Revoke[0].Partition)]
	status, body, _ := h.do(t, "POST", "/v1/groups/g/commit", b.token, api.CommitRequest{Offsets: []api.CommitOffset{
		{Topic: kept.Topic, Partition: kept.Partition, Offset: 0, Capability: kept.Capability}}})
	if status != 401 || errorCode(t, body) != api.CodeTokenExpired {
		t.Fatalf("an expired cached capability: %d %s, want 401 token_expired", status, body)
	}
}

// resigned is token's header and claims signed with a fresh Ed25519 key:
// the kid is genuine, the signature is not the coordinator's.
func resigned(t *testing.T, token string) string {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signed := token[:strings.LastIndex(token, ".")]
	return signed + "." + base64.RawURLEncoding.EncodeToString(ed25519.Sign(key, []byte(signed)))
}

// editedPayload is token with its epoch claim raised, under its own
// signature.
func editedPayload(t *testing.T, token string) string {
	t.Helper()
	parts := strings.Split(token, ".")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(payload), `"ep":1`, `"ep":7`, 1)
	if edited == string(payload) {
		t.Fatalf("no ep claim of 1 in %s", payload)
	}
	parts[1] = base64.RawURLEncoding.EncodeToString([]byte(edited))
	return strings.Join(parts, ".")
}
