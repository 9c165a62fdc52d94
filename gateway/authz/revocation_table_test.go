package authz

import (
	"errors"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/ocap"
	"github.com/capgate/capgate/revocation/revocationtest"
)

// TestRevocationTable runs the one table of package revocationtest
// through the gateway's path: ocap verification with the gateway's leeway,
// then Decide under a view that learnt the coordinator's rule from a
// reset. The coordinator shell (coordinator) and the simulation (e2e/sim)
// run the same table and must give the same answers.
func TestRevocationTable(t *testing.T) {
	ring, err := ocap.NewKeyRing(newSeeded(9), t0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range revocationtest.Cases() {
		t.Run(tc.Name, func(t *testing.T) {
			cfg := ocap.VerifierConfig{Issuer: "coordinator", Audience: "dev", Leeway: tc.Leeway, MaxLease: time.Hour}
			minter, err := ocap.NewMinter(cfg, ring, newSeeded(10))
			if err != nil {
				t.Fatal(err)
			}
			verifier, err := ocap.NewVerifier(cfg)
			if err != nil {
				t.Fatal(err)
			}
			keys, _ := ocap.ImportJWKS(ring.JWKS())
			verifier.SetKeys(keys)
			deny := t0.Unix() + 100
			issued := time.Unix(deny-50, 0)
			token, claims, err := minter.Mint(ocap.KindCapability, *capability(), issued, time.Unix(deny, 0).Add(tc.TokenAfter).Sub(issued))
			if err != nil {
				t.Fatal(err)
			}
			v := NewView(Config{Leeway: tc.Leeway})
			settings := &api.CoordinatorSettings{LeewayMs: tc.Leeway.Milliseconds(), MaxClockSkewMs: tc.MaxClockSkew.Milliseconds()}
			mustApply(t, v, api.SyncResponse{Seq: 1, Reset: true, Keys: ring.JWKS().Keys,
				Denied: []api.Denied{{JTI: claims.ID, Exp: deny}}, Settings: settings}, issued)
			now := time.Unix(deny, 0).Add(tc.At)
			if got := gatewayAnswer(verifier, v, token, now); got != tc.Want {
				t.Fatalf("gateway answers %s, want %s", got, tc.Want)
			}
		})
	}
}

func gatewayAnswer(verifier *ocap.Verifier, v *View, token string, now time.Time) revocationtest.Answer {
	claims, err := verifier.Verify(token, ocap.KindCapability, now)
	switch {
	case errors.Is(err, ocap.ErrExpired):
		return revocationtest.Expired
	case err != nil:
		return revocationtest.Answer(err.Error())
	}
	switch r := Decide(claims, fetchReq(0), v, now); r {
	case Allow:
		return revocationtest.Allowed
	case Expired:
		return revocationtest.Expired
	case Denied:
		return revocationtest.Revoked
	default:
		return revocationtest.Answer(r.String())
	}
}
