package guard_test

import (
	"crypto/rand"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/gateway/authz"
	"github.com/capgate/capgate/gateway/guard"
	"github.com/capgate/capgate/ocap"
)

// TestCredentialEntryRefusedOnlyByItsOwnRevocation: the Kafka listener
// registers a produce made with a client credential under that
// credential. Refused judged it by the capability rule, which never
// allows a credential, so every denial or member revocation anywhere
// cancelled and waited for it (safe, but each revocation waited for
// unrelated produces). Now an unrelated denial leaves it, and a denial of
// its own id refuses it.
func TestCredentialEntryRefusedOnlyByItsOwnRevocation(t *testing.T) {
	cfg := ocap.VerifierConfig{Issuer: "c", Audience: "a", Leeway: time.Second, MaxLease: time.Hour}
	ring, err := ocap.NewKeyRing(rand.Reader, t0)
	if err != nil {
		t.Fatal(err)
	}
	minter, err := ocap.NewMinter(cfg, ring, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := ocap.NewVerifier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := ocap.ImportJWKS(ring.JWKS())
	if err != nil {
		t.Fatal(err)
	}
	verifier.SetKeys(keys)
	token, _, err := minter.Mint(ocap.KindClient, ocap.Claims{Subject: "svc", Groups: []string{"g"}, Topics: []string{"t"}}, t0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cred, err := verifier.Verify(token, ocap.KindClient, t0)
	if err != nil {
		t.Fatal(err)
	}
	view := authz.NewView(authz.Config{})
	if _, err := view.Apply(api.SyncResponse{Seq: 1, Reset: true, Settings: settings}, t0); err != nil {
		t.Fatal(err)
	}
	reg := guard.NewRegistry[string](guard.Bugs{})
	reg.Add(cred, authz.Request{Topic: "t", Partition: 0, Op: ocap.OpProduce, Offset: -1}, "credential produce")
	other := capability("m1", 1, 1)
	reg.Add(other, authz.Request{Topic: "t", Partition: 1, Op: ocap.OpFetch}, "m1 fetch")

	refused := func(u api.SyncResponse) []string {
		t.Helper()
		ch, err := view.Apply(u, t0)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range reg.Refused(ch, view, t0) {
			got = append(got, e.Value)
		}
		return got
	}
	until := t0.Add(time.Hour).Unix()
	if got := refused(api.SyncResponse{Seq: 2, Denied: []api.Denied{{JTI: other.ID, Exp: until}}}); len(got) != 1 || got[0] != "m1 fetch" {
		t.Fatalf("a denial of another capability refused %v, want only m1's fetch", got)
	}
	if got := refused(api.SyncResponse{Seq: 3, Denied: []api.Denied{{JTI: cred.ID, Exp: until}}}); len(got) != 2 || got[0] != "credential produce" {
		t.Fatalf("a denial of the credential refused %v, want its produce (and m1's fetch, still denied)", got)
	}
}
