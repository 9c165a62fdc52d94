package coordinator_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/ocap"
)

// TestAdminRevokeWaitsForGateway: a partition revoke answers only after
// the gateway acknowledged the fence.
func TestAdminRevokeWaitsForGateway(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 4})
	h := e.start(t)
	gw := newGateway(h, "gw1")
	registered := gw.poll(t, 0, 0)
	creds := h.clientCredential(t, []string{"g"}, []string{"orders"})
	a := h.join(t, "g", creds, api.JoinRequest{Topics: []string{"orders"}})
	old, _ := a.grant("orders", 1)

	revoked := make(chan coordinator.RevokeResponse, 1)
	go func() {
		var out coordinator.RevokeResponse
		status, b, _, err := h.try("POST", "/v1/admin/groups/g/partitions/orders/1/revoke", e.adminToken, coordinator.RevokeRequest{Reason: "test"})
		if err == nil && status == 200 {
			json.Unmarshal(b, &out)
		}
		revoked <- out
	}()
	fenced := gw.poll(t, registered.Seq, 5000)
	if !slices.Contains(fenced.Fences, api.Fence{Group: "g", Topic: "orders", Partition: 1, Epoch: old.Epoch + 1}) {
		t.Fatalf("poll after the revoke: %+v, want the fence at epoch %d", fenced, old.Epoch+1)
	}
	select {
	case r := <-revoked:
		t.Fatalf("revoke answered %+v before the gateway acknowledged", r)
	default:
	}
	gw.poll(t, fenced.Seq, 100) // acknowledges the fence
	if r := <-revoked; r.Epoch != old.Epoch+1 || r.Partition != 1 {
		t.Fatalf("revoke answer %+v, want epoch %d", r, old.Epoch+1)
	}
	resp := a.heartbeat(t, 1000)
	if len(resp.Revoke) != 1 || resp.Revoke[0].Partition != 1 || resp.Revoke[0].Epoch != old.Epoch {
		t.Fatalf("holder's heartbeat: %+v", resp)
	}
}

// TestAdminLease leases one partition to its member owner and another to
// an outside holder, whose capability verifies against the JWKS.
func TestAdminLease(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 4})
	e.fill(t, 1000) // commits name offsets up to 1000: the log must reach them
	h := e.start(t)
	gw := newGateway(h, "gw1")
	gw.run(500)
	defer gw.halt()
	creds := h.clientCredential(t, []string{"g"}, []string{"orders"})
	a := h.join(t, "g", creds, api.JoinRequest{Topics: []string{"orders"}})

	var own coordinator.LeaseResponse
	h.call(t, "POST", "/v1/admin/groups/g/partitions/orders/0/lease", e.adminToken,
		coordinator.LeaseRequest{Holder: a.id, TTLMs: 60000}, 200, &own)
	if own.Outside || own.Holder != a.id || own.Capability != "" {
		t.Fatalf("lease to the member: %+v", own)
	}

	leased := make(chan coordinator.LeaseResponse, 1)
	go func() {
		var out coordinator.LeaseResponse
		status, b, _, err := h.try("POST", "/v1/admin/groups/g/partitions/orders/1/lease", e.adminToken,
			coordinator.LeaseRequest{Holder: "partner-job", TTLMs: 60000})
		if err == nil && status == 200 {
			json.Unmarshal(b, &out)
		}
		leased <- out
	}()
	var revoke []api.PartitionRef
	for i := 0; len(revoke) == 0 && i < 10; i++ { // other news may come first
		revoke = a.heartbeat(t, 2000).Revoke
	}
	if len(revoke) != 1 || revoke[0].Partition != 1 {
		t.Fatalf("member heartbeat revokes %+v, want partition 1", revoke)
	}
	a.releaseAll(t, revoke, func(api.PartitionRef) int64 { return 42 })
	out := <-leased
	if !out.Outside || out.Holder != "partner-job" || out.Capability == "" || out.Offset != 42 || out.JTI == "" {
		t.Fatalf("lease to an outside holder: %+v", out)
	}
	e.remember(out.Capability)
	claims := verifyWithJWKS(t, h, out.Capability)
	if claims.Subject != "partner-job" || claims.Group != "g" || claims.Epoch != out.Epoch || claims.PartitionNumber() != 1 || claims.ID != out.JTI {
		t.Fatalf("outside capability claims %+v, lease %+v", claims, out)
	}
	for _, p := range h.describe(t, "g").Partitions {
		if p.Partition == 1 && (p.Owner != "partner-job" || !p.OwnerOutside || p.Lease == nil) {
			t.Fatalf("leased partition: %+v", p)
		}
	}

	// The outside holder has no member token: it commits with its lease
	// capability as the bearer, so its progress is kept.
	var committed api.CommitResponse
	h.call(t, "POST", "/v1/groups/g/commit", out.Capability,
		api.CommitRequest{Offsets: []api.CommitOffset{{Topic: "orders", Partition: 1, Offset: 77}}}, 200, &committed)
	if len(committed.Committed) != 1 || committed.Committed[0].Offset != 77 {
		t.Fatalf("outside holder's commit answered %+v", committed)
	}
	h.expectError(t, "POST", "/v1/groups/g/commit", out.Capability,
		api.CommitRequest{Offsets: []api.CommitOffset{{Topic: "orders", Partition: 1, Offset: 78}}, Release: true}, 400, api.CodeBadRequest)
	h.expectError(t, "POST", "/v1/groups/other/commit", out.Capability,
		api.CommitRequest{Offsets: []api.CommitOffset{{Topic: "orders", Partition: 1, Offset: 78}}}, 403, api.CodeForbidden)
	// A member's own capability is no bearer for a commit: it is not an
	// outside holder's.
	g0, _ := a.grant("orders", 0)
	h.expectError(t, "POST", "/v1/groups/g/commit", g0.Capability,
		api.CommitRequest{Offsets: []api.CommitOffset{{Topic: "orders", Partition: 0, Offset: 5}}}, 409, api.CodeStaleEpoch)

	// A lease past groups.limits.lease_ttl_max is refused, and a lease on
	// a group that does not exist creates nothing.
	h.expectError(t, "POST", "/v1/admin/groups/g/partitions/orders/2/lease", e.adminToken,
		coordinator.LeaseRequest{Holder: "x", TTLMs: 10_000_000_000}, 400, api.CodeBadRequest)
	h.expectError(t, "POST", "/v1/admin/groups/nope/partitions/orders/2/lease", e.adminToken,
		coordinator.LeaseRequest{Holder: "x", TTLMs: 60000}, 404, api.CodeNotFound)
	h.expectError(t, "POST", "/v1/admin/groups/nope/partitions/orders/2/revoke", e.adminToken, nil, 404, api.CodeNotFound)
	h.expectError(t, "GET", "/v1/admin/groups/nope", e.adminToken, nil, 404, api.CodeNotFound)
}

// verifyWithJWKS verifies a capability with only the public key set.
func verifyWithJWKS(t *testing.T, h *harness, token string) *ocap.Claims {
	t.Helper()
	var set api.JWKS
	h.call(t, "GET", "/.well-known/jwks.json", "", nil, 200, &set)
	keys, err := ocap.ImportJWKS(set)
	if err != nil {
		t.Fatal(err)
	}
	cfg := h.env.cfg
	v, err := ocap.NewVerifier(ocap.VerifierConfig{Issuer: cfg.ID, Audience: cfg.Cluster, Leeway: cfg.Leeway, MaxLease: cfg.MaxLease})
	if err != nil {
		t.Fatal(err)
	}
	v.SetKeys(keys)
	claims, err := v.Verify(token, ocap.KindCapability, time.Now())
	if err != nil {
		t.Fatalf("verify against the JWKS: %v", err)
	}
	return claims
}

// TestAdminSyncChannel: shared grants, jti and member revokes, QoS, group
// config, client credentials and key rotation, each seen where it must be:
// the answer, the sync channel, the JWKS.
func TestAdminSyncChannel(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 4})
	e.fill(t, 60) // offset resets name offsets up to 60: the log must reach them
	h := e.start(t)
	gw := newGateway(h, "gw1")
	gw.run(500)
	defer gw.halt()
	creds := h.clientCredential(t, []string{"g"}, []string{"orders"})
	a := h.join(t, "g", creds, api.JoinRequest{ClientID: "a", Topics: []string{"orders"}})
	h.expectError(t, "POST", "/v1/groups/x/join", creds, api.JoinRequest{Topics: []string{"orders"}}, 403, api.CodeForbidden)

	t.Run("shared grant and jti revoke", func(t *testing.T) {
		from, to := int64(10), int64(20)
		var grant api.CapabilityResponse
		h.call(t, "POST", "/v1/admin/capabilities", e.adminToken, coordinator.SharedGrantRequest{
			Topic: "orders", Partition: 2, TTLMs: 60000, Holder: "auditor", OffsetFrom: &from, OffsetTo: &to,
		}, 200, &grant)
		e.remember(grant.Capability)
		claims := verifyWithJWKS(t, h, grant.Capability)
		if claims.Epoch != 0 || claims.Group != "" || claims.Subject != "auditor" || !claims.Ops.Has(ocap.OpFetch) ||
			claims.Ops.Has(ocap.OpCommit) || claims.Offsets == nil || *claims.Offsets != (ocap.OffsetRange{From: 10, To: 20}) {
			t.Fatalf("shared grant claims: %+v", claims)
		}
		h.expectError(t, "POST", "/v1/admin/capabilities", e.adminToken, coordinator.SharedGrantRequest{
			Topic: "orders", Partition: 99, TTLMs: 60000, Holder: "auditor"}, 404, api.CodeNotFound)
		h.expectError(t, "POST", "/v1/admin/capabilities", e.adminToken, coordinator.SharedGrantRequest{
			Topic: "orders", Partition: 0, TTLMs: int64(e.cfg.MaxLease/time.Millisecond) + 1000, Holder: "auditor"}, 400, api.CodeBadRequest)

		var denied coordinator.DenyResponse
		h.call(t, "POST", "/v1/admin/capabilities/"+grant.JTI+"/revoke", e.adminToken,
			coordinator.DenyRequest{Exp: int64(claims.ExpiresAt)}, 200, &denied)
		if denied.Exp != int64(claims.ExpiresAt) {
			t.Fatalf("denied until %d, token exp %d", denied.Exp, claims.ExpiresAt)
		}
		gw.waitFor(t, "the denied jti", func(r api.SyncResponse) bool {
			return slices.Contains(r.Denied, api.Denied{JTI: grant.JTI, Exp: denied.Exp})
		})
	})

	t.Run("attenuate", func(t *testing.T) {
		g, _ := a.grant("orders", 0)
		var child api.CapabilityResponse
		h.call(t, "POST", "/v1/capabilities/attenuate", g.Capability, api.AttenuateRequest{Ops: []string{"fetch"}, TTLMs: 5000}, 200, &child)
		e.remember(child.Capability)
		claims := verifyWithJWKS(t, h, child.Capability)
		parent := claimsOf(t, g.Capability)
		if claims.Ops.Has(ocap.OpCommit) || len(claims.Chain) != 1 || claims.Chain[0] != parent["jti"] || claims.Epoch != g.Epoch {
			t.Fatalf("child claims: %+v", claims)
		}
		h.expectError(t, "POST", "/v1/capabilities/attenuate", child.Capability, api.AttenuateRequest{Ops: []string{"fetch", "commit"}}, 403, api.CodeForbidden)
		h.expectError(t, "POST", "/v1/capabilities/attenuate", g.Capability, api.AttenuateRequest{Ops: []string{"delete"}}, 400, api.CodeBadRequest)
		h.expectError(t, "POST", "/v1/capabilities/attenuate", a.token, api.AttenuateRequest{}, 401, api.CodeUnauthorized)
	})

	t.Run("qos", func(t *testing.T) {
		p, rate := int32(1), int64(1000)
		var o api.QoSOverride
		h.call(t, "PUT", "/v1/admin/qos", e.adminToken, coordinator.QoSRequest{
			Selector: api.QoSSelector{Group: "g", Topic: "orders", Partition: &p}, LogLevel: "debug", MaxBytesPerSec: &rate, TTLMs: 60000,
		}, 200, &o)
		if o.ID == "" || o.LogLevel != "debug" || o.Until <= time.Now().Unix() {
			t.Fatalf("override: %+v", o)
		}
		gw.waitFor(t, "the qos override", func(r api.SyncResponse) bool {
			return slices.ContainsFunc(r.QoS, func(q api.QoSOverride) bool { return q.ID == o.ID && q.MaxBytesPerSec == 1000 })
		})
		h.expectError(t, "PUT", "/v1/admin/qos", e.adminToken, coordinator.QoSRequest{LogLevel: "debug", TTLMs: 1000}, 400, api.CodeBadRequest)
		h.expectError(t, "PUT", "/v1/admin/qos", e.adminToken, coordinator.QoSRequest{Selector: api.QoSSelector{Group: "g"}, LogLevel: "loud", TTLMs: 1000}, 400, api.CodeBadRequest)
	})

	t.Run("group config", func(t *testing.T) {
		moves, handoff := 5, int64(2000)
		var cfg coordinator.GroupConfigView
		h.call(t, "PUT", "/v1/admin/groups/g/config", e.adminToken,
			coordinator.GroupConfigRequest{MaxMovesPerSecond: &moves, HandoffTimeoutMs: &handoff}, 200, &cfg)
		if cfg.MaxMovesPerSecond != 5 || cfg.HandoffTimeoutMs != 2000 || cfg.Assignor != "sticky" {
			t.Fatalf("config: %+v", cfg)
		}
		if d := h.describe(t, "g"); d.Config != cfg {
			t.Fatalf("described config %+v, set %+v", d.Config, cfg)
		}
		bad := "middle"
		h.expectError(t, "PUT", "/v1/admin/groups/g/config", e.adminToken, coordinator.GroupConfigRequest{OffsetReset: &bad}, 400, api.CodeBadRequest)
		other := "range"
		h.expectError(t, "PUT", "/v1/admin/groups/g/config", e.adminToken, coordinator.GroupConfigRequest{Assignor: &other}, 409, api.CodeInconsistentAssign)
	})

	t.Run("member revoke", func(t *testing.T) {
		b := h.join(t, "g", creds, api.JoinRequest{ClientID: "b", Topics: []string{"orders"}})
		var out coordinator.MemberRevokeResponse
		h.call(t, "POST", "/v1/admin/groups/g/members/"+b.id+"/revoke", e.adminToken, nil, 200, &out)
		if out.MemberID != b.id || out.Until == "" {
			t.Fatalf("member revoke: %+v", out)
		}
		gw.waitFor(t, "the revoked member", func(r api.SyncResponse) bool {
			return slices.ContainsFunc(r.RevokedMembers, func(m api.RevokedMember) bool { return m.Group == "g" && m.MemberID == b.id })
		})
		h.expectError(t, "POST", "/v1/groups/g/heartbeat", b.token, nil, 409, api.CodeUnknownMember)
		h.expectError(t, "GET", "/v1/groups/g/offsets", b.token, nil, 409, api.CodeUnknownMember)
		var again coordinator.MemberRevokeResponse
		h.call(t, "POST", "/v1/admin/groups/g/members/"+b.id+"/revoke", e.adminToken, nil, 200, &again)
		if !again.AlreadyRevoked || again.Fenced != 0 || again.Until != out.Until || out.AlreadyRevoked {
			t.Fatalf("member revoke repeated: %+v after %+v, want already revoked until %s", again, out, out.Until)
		}
		h.expectError(t, "POST", "/v1/admin/groups/g/members/never-joined/revoke", e.adminToken, nil, 409, api.CodeUnknownMember)
	})

	t.Run("listings", func(t *testing.T) {
		var groups coordinator.GroupsResponse
		h.call(t, "GET", "/v1/admin/groups", e.adminToken, nil, 200, &groups)
		if !slices.Equal(groups.Groups, []string{"g"}) {
			t.Fatalf("groups: %+v", groups)
		}
		var gws coordinator.GatewaysResponse
		h.call(t, "GET", "/v1/admin/gateways", e.adminToken, nil, 200, &gws)
		if len(gws.Gateways) != 1 || gws.Gateways[0].ID != "gw1" || gws.Gateways[0].Acked == 0 || gws.Gateways[0].LastSeen == "" ||
			gws.SilentGateways != "fence" { // the default, stated so the console can explain silence
			t.Fatalf("gateways: %+v", gws)
		}
		h.expectError(t, "GET", "/v1/admin/groups/nope", e.adminToken, nil, 404, api.CodeNotFound)
	})

	t.Run("offset reset", func(t *testing.T) {
		for _, offset := range []int64{50, 7} { // the second reset goes backwards
			h.call(t, "PUT", "/v1/admin/groups/g/partitions/orders/3/offset", e.adminToken, coordinator.OffsetResetRequest{Offset: offset}, 200, nil)
		}
		var offsets api.OffsetsResponse
		h.call(t, "GET", "/v1/groups/g/offsets", e.adminToken, nil, 200, &offsets)
		if !slices.Contains(offsets.Offsets, api.CommittedOffset{Topic: "orders", Partition: 3, Offset: 7}) {
			t.Fatalf("offsets after reset: %+v", offsets)
		}
		h.expectError(t, "PUT", "/v1/admin/groups/g/partitions/orders/9/offset", e.adminToken, coordinator.OffsetResetRequest{Offset: 1}, 404, api.CodeNotFound)
		h.expectError(t, "PUT", "/v1/admin/groups/g/partitions/orders/3/offset", e.adminToken, coordinator.OffsetResetRequest{Offset: 61}, 416, api.CodeOffsetOutOfRange)
		h.expectError(t, "PUT", "/v1/admin/groups/g/partitions/orders/3/offset", e.adminToken, coordinator.OffsetResetRequest{To: "middle"}, 400, api.CodeBadRequest)
		h.expectError(t, "PUT", "/v1/admin/groups/nope/partitions/orders/3/offset", e.adminToken, coordinator.OffsetResetRequest{Offset: 1}, 404, api.CodeNotFound)
		for to, want := range map[string]int64{"latest": 60, "earliest": 0} {
			var out coordinator.OffsetResetResponse
			h.call(t, "PUT", "/v1/admin/groups/g/partitions/orders/3/offset", e.adminToken, coordinator.OffsetResetRequest{To: to}, 200, &out)
			if out.Offset != want {
				t.Fatalf("reset to %s: %+v, want offset %d", to, out, want)
			}
		}
	})

	t.Run("key rotation", func(t *testing.T) {
		var before api.JWKS
		h.call(t, "GET", "/.well-known/jwks.json", "", nil, 200, &before)
		var keys coordinator.KeysResponse
		h.call(t, "POST", "/v1/admin/keys/rotate", e.adminToken, nil, 200, &keys)
		if !slices.ContainsFunc(before.Keys, func(k api.JWK) bool { return k.Kid == keys.Current }) || keys.Previous == "" {
			t.Fatalf("rotation %+v: the published next key must sign now; before %+v", keys, before)
		}
		gw.waitFor(t, "the new key set", func(r api.SyncResponse) bool {
			return slices.ContainsFunc(r.Keys, func(k api.JWK) bool { return k.Kid == keys.Next })
		})
		var after api.JWKS
		h.call(t, "GET", "/.well-known/jwks.json", "", nil, 200, &after)
		for _, kid := range []string{keys.Current, keys.Next, keys.Previous} {
			if !slices.ContainsFunc(after.Keys, func(k api.JWK) bool { return k.Kid == kid }) {
				t.Fatalf("jwks %+v lacks %s", after, kid)
			}
		}
		a.heartbeat(t, 10) // the member token signed by the previous key still verifies
		h.call(t, "POST", "/v1/admin/keys/rotate", e.adminToken, nil, 200, &keys)
		h.expectError(t, "POST", "/v1/groups/g/heartbeat", a.token, nil, 401, api.CodeUnauthorized) // its key is retired now
	})
	t.Run("client credential patterns", func(t *testing.T) {
		var out coordinator.ClientResponse
		h.call(t, "POST", "/v1/admin/clients", e.adminToken, coordinator.ClientRequest{Name: "any-topic", Groups: []string{"orders-*"}}, 200, &out)
		e.remember(out.Credential)
		claims := claimsOf(t, out.Credential)
		if fmt.Sprint(claims["grps"]) != "[orders-*]" || fmt.Sprint(claims["tps"]) != "[*]" {
			t.Fatalf("credential without topics: %v, want any topic", claims)
		}
		h.join(t, "orders-eu", out.Credential, api.JoinRequest{ClientID: "eu", Topics: []string{"orders"}})
		h.expectError(t, "POST", "/v1/groups/billing/join", out.Credential, api.JoinRequest{Topics: []string{"orders"}}, 403, api.CodeForbidden)
		for _, bad := range [][2][]string{{{"or*ders"}, nil}, {{"g"}, {"ord*rs"}}, {{"**"}, nil}} {
			h.expectError(t, "POST", "/v1/admin/clients", e.adminToken, coordinator.ClientRequest{Name: "bad", Groups: bad[0], Topics: bad[1]}, 400, api.CodeBadRequest)
		}
	})

	t.Run("group delete", func(t *testing.T) {
		h.expectError(t, "DELETE", "/v1/admin/groups/g", e.adminToken, nil, 409, api.CodeConflict)
		h.expectError(t, "DELETE", "/v1/admin/groups/g?force=maybe", e.adminToken, nil, 400, api.CodeBadRequest)
		var out coordinator.GroupDeleteResponse
		h.call(t, "DELETE", "/v1/admin/groups/g?force=true", e.adminToken, nil, 200, &out)
		if out.MembersRevoked == 0 || out.OffsetsDeleted == 0 {
			t.Fatalf("forced delete: %+v", out)
		}
		h.expectError(t, "GET", "/v1/admin/groups/g", e.adminToken, nil, 404, api.CodeNotFound)
		h.expectError(t, "DELETE", "/v1/admin/groups/g", e.adminToken, nil, 404, api.CodeNotFound)
		var groups coordinator.GroupsResponse
		h.call(t, "GET", "/v1/admin/groups", e.adminToken, nil, 200, &groups)
		if slices.Contains(groups.Groups, "g") {
			t.Fatalf("deleted group listed: %v", groups.Groups)
		}
	})

	t.Run("client credential without http", func(t *testing.T) {
		direct, err := h.c.MintClientCredential("dev", []string{"g"}, []string{"orders"}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		e.remember(direct)
		h.join(t, "g", direct, api.JoinRequest{ClientID: "dev", Topics: []string{"orders"}})
		if _, err := h.c.MintClientCredential("dev", nil, []string{"orders"}, time.Hour); err == nil {
			t.Fatal("credential without groups minted")
		}
	})
	e.checkLogs(t)
}
