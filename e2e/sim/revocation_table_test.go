package sim

import (
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client/session"
	"github.com/capgate/capgate/coordinator/driver"
	"github.com/capgate/capgate/ocap"
	"github.com/capgate/capgate/revocation/revocationtest"
)

// TestRevocationTable runs the one table of package revocationtest
// through the simulation: its coordinator shell (the commit check of a
// capability, coordinator/commit.go) and its gateway (sync-applied
// authz.View and the fetch admission), after an admin deny that travelled
// the simulated network and sync channel. The coordinator shell
// (coordinator) and the gateway (gateway/authz) run the same table and
// must give the same answers.
func TestRevocationTable(t *testing.T) {
	for _, tc := range revocationtest.Cases() {
		t.Run(tc.Name, func(t *testing.T) {
			w := newWorld(1, Options{tune: func(p *profile) {
				p.machine.Leeway, p.machine.MaxClockSkew = tc.Leeway, tc.MaxClockSkew
			}})
			w.healed = true // no faults: this test is about the rule
			g := w.gateways[0]
			g.skew = 0
			w.coord.boot()
			g.boot()
			deny := base.Unix() + 100
			partition := int32(0)
			token, claims, _ := (&simMinter{tokens: w.tokens}).Mint(ocap.KindCapability, ocap.Claims{Subject: "m", Group: groupName,
				Topic: "t", Partition: &partition, Epoch: 1, Ops: driver.GrantOps}, w.wall(), time.Unix(deny, 0).Add(tc.TokenAfter).Sub(w.wall()))
			req := &request{kind: reqDeny, jti: claims.ID, expires: time.Unix(deny, 0), reply: func(response) {}}
			w.net.request(w.adminNode(), coordNode, false, call{}, func() { w.coord.receive(req) })
			at := time.Unix(deny, 0).Add(tc.At).Sub(base)
			w.loop(at)
			if w.failure != nil {
				t.Fatal(w.failure)
			}
			offsets := []api.CommitOffset{{Topic: "t", Partition: 0, Offset: 1, Capability: token}}
			var code api.Code
			if _, refusal := driver.CommitOffsets(simVerifier{w.coord}, groupName, "m", offsets, false); refusal != nil {
				code = refusal.Code
			}
			coordinator := answerOf(code)
			_, code = g.admit(&fetchRequest{token: token, part: session.Partition{Topic: "t", Partition: 0}})
			gateway := answerOf(code)
			if coordinator != tc.Want || gateway != tc.Want {
				t.Fatalf("sim coordinator answers %s, sim gateway %s, want %s", coordinator, gateway, tc.Want)
			}
		})
	}
}

func answerOf(code api.Code) revocationtest.Answer {
	if code == "" {
		return revocationtest.Allowed
	}
	return revocationtest.Answer(code)
}
