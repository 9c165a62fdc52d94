package gateway

import (
	"net/http"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/gateway/authz"
	"github.com/capgate/capgate/ocap"
)

// TestQoSHolderOfACredentialIsItsTenant is redteam20's recommendation
// #1: a QoS override's holder matched a client credential by its sub —
// for an admin-minted credential its --name, a free label two tenants'
// credentials may share — so tenant B's credential named like A's was
// selected by the override an operator set for A: it drew on (and could
// drain) A's byte rate, or enjoyed A's higher one. A credential's holder
// is now its tenant (authz.HolderID): its jti, which only its holder
// presents; its name selects nothing.
func TestQoSHolderOfACredentialIsItsTenant(t *testing.T) {
	h := newHarness(t, nil)
	produces := []string{"consume", "produce"}
	credA, a := h.mintCredential([]string{testTopic}, produces, time.Now(), time.Hour)
	credB, b := h.mintCredential([]string{testTopic}, produces, time.Now(), time.Hour)
	if a.Subject != b.Subject || a.ID == b.ID {
		t.Fatalf("want two credentials of one name: %q %q, ids %q %q", a.Subject, b.Subject, a.ID, b.ID)
	}
	until := time.Now().Add(time.Hour).Unix()
	h.sync.waitAck(t, h.sync.push(api.SyncResponse{QoS: []api.QoSOverride{
		{ID: "a-slow", Selector: api.QoSSelector{Holder: a.ID}, MaxBytesPerSec: 10, Until: until},
		{ID: "by-name", Selector: api.QoSSelector{Holder: a.Subject}, MaxBytesPerSec: 10, Until: until},
	}}))
	if r := h.produceWith(credA, testTopic, 0); r.status != http.StatusOK {
		t.Fatalf("A's first produce: %d %s", r.status, r.body)
	}
	expectError(t, h.produceWith(credA, testTopic, 0), http.StatusTooManyRequests, api.CodeRateLimited)
	for i := range 3 {
		if r := h.produceWith(credB, testTopic, 0); r.status != http.StatusOK {
			t.Fatalf("B's produce %d, its credential named as A's: %d %s", i, r.status, r.body)
		}
	}
}

// TestHolderIDOfEachPrincipal: what a holder selector names for each
// kind of token the gateway serves.
func TestHolderIDOfEachPrincipal(t *testing.T) {
	h := newHarness(t, nil)
	v := h.gw.verifier.Load()
	verified := func(kind ocap.Kind, c ocap.Claims) *ocap.Claims {
		tok, _, err := h.minter.Mint(kind, c, time.Now(), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		got, err := v.Verify(tok, kind, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	capability := verified(ocap.KindCapability, capClaims(0))
	admin := verified(ocap.KindClient, ocap.Claims{Subject: "svc", Groups: []string{"*"}, Topics: []string{testTopic}})
	oauth := verified(ocap.KindClient, ocap.Claims{Subject: "oauth:reports", Groups: []string{"*"}, Topics: []string{testTopic}})
	idp := &ocap.Claims{ID: "aWRlbnRpdHktaWQtMDAwMA", Issuer: "https://idp.example", Subject: "alice", Groups: []string{"g"}}
	for _, tc := range []struct {
		name string
		c    *ocap.Claims
		want string
	}{
		{"a capability: its sub (member id)", capability, capability.Subject},
		{"an admin-minted credential: its jti", admin, admin.ID},
		{"an OAuth client's credential: oauth:<client_id>", oauth, "oauth:reports"},
		{"an IdP identity (the listener's claims): its id", idp, idp.ID},
		{"a credential scoped to a produce", scopedClaims(admin), admin.ID},
	} {
		if got := authz.HolderID(tc.c); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func scopedClaims(c *ocap.Claims) *ocap.Claims {
	return scoped(c, authz.Request{Topic: testTopic, Partition: 1, Op: ocap.OpProduce, Offset: -1})
}
