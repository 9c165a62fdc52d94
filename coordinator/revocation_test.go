package coordinator_test

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/revocation/revocationtest"
)

// TestRevocationTable runs the one table of package revocationtest
// through the coordinator shell over HTTP, on a coordinator whose clock
// the test sets, for two kinds of token: a client credential denied until
// D and presented at a join at D + At (refused by the shell's view and by
// the machine), and a capability denied until D and presented to
// attenuate (refused by the shell's view alone). The gateway
// (gateway/authz) and the simulation (e2e/sim) run the same table and
// must give the same answers.
//
// Before the one revocation view, the coordinator's own deny-list let an
// entry lapse at exp: with 2 s leeway it accepted the denied credential
// at exp+1s while its verifier still did ("the reproduced gap" row).
func TestRevocationTable(t *testing.T) {
	type rule struct{ leeway, skew time.Duration }
	byRule := map[rule][]revocationtest.Case{}
	var rules []rule
	for _, tc := range revocationtest.Cases() {
		r := rule{tc.Leeway, tc.MaxClockSkew}
		if byRule[r] == nil {
			rules = append(rules, r)
		}
		byRule[r] = append(byRule[r], tc)
	}
	for _, r := range rules {
		t.Run(fmt.Sprintf("leeway %s skew %s", r.leeway, r.skew), func(t *testing.T) {
			e := newEnv(t, map[string]int32{"t": 1})
			e.cfg.Leeway, e.cfg.Groups.MaxClockSkew = r.leeway, r.skew
			start := time.Now().Unix()
			var clock atomic.Int64
			clock.Store(time.Unix(start, 0).UnixNano())
			h := e.start(t, coordinator.WithClock(func() time.Time { return time.Unix(0, clock.Load()) }))
			for i, tc := range byRule[r] {
				deny := start + 1000*int64(i+1)
				clock.Store(time.Unix(deny-50, 0).UnixNano())
				ttl := (50*time.Second + tc.TokenAfter).Milliseconds()
				var cred coordinator.ClientResponse
				h.call(t, "POST", "/v1/admin/clients", e.adminToken, coordinator.ClientRequest{
					Name: "svc", Groups: []string{"*"}, Topics: []string{"*"}, TTLMs: ttl}, 200, &cred)
				var grant api.CapabilityResponse
				h.call(t, "POST", "/v1/admin/capabilities", e.adminToken, coordinator.SharedGrantRequest{
					Topic: "t", Partition: 0, TTLMs: ttl, Holder: "ops"}, 200, &grant)
				e.remember(cred.Credential, grant.Capability)
				for _, jti := range []string{cred.JTI, grant.JTI} {
					h.call(t, "POST", "/v1/admin/capabilities/"+jti+"/revoke", e.adminToken, coordinator.DenyRequest{Exp: deny}, 200, nil)
				}
				clock.Store(time.Unix(deny, 0).Add(tc.At).UnixNano())
				for _, try := range []struct{ what, path, token string }{
					{"client credential at join", "/v1/groups/g/join", cred.Credential},
					{"capability at attenuate", "/v1/capabilities/attenuate", grant.Capability},
				} {
					var body any = api.JoinRequest{Topics: []string{"t"}}
					if try.token == grant.Capability {
						body = api.AttenuateRequest{}
					}
					status, raw, _ := h.do(t, "POST", try.path, try.token, body)
					got := revocationtest.Allowed
					if status != http.StatusOK {
						got = revocationtest.Answer(errorCode(t, raw))
					}
					if got != tc.Want {
						t.Errorf("%s: %s: coordinator answers %s (%d), want %s", tc.Name, try.what, got, status, tc.Want)
					}
				}
			}
		})
	}
}
