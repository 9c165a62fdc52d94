package gateway

import (
	"crypto/ed25519"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/capgate/capgate/api"
)

// resign rewrites a capability the harness minted — its claims JSON
// edited by edit — and signs it again with the harness's current key:
// what only the coordinator's key can produce (a future coordinator, or
// an older one, minting claims this gateway reads differently).
func (h *harness) resign(token string, edit func(claims string) string) string {
	h.t.Helper()
	parts := strings.Split(token, ".")
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		h.t.Fatal(err)
	}
	signing := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(edit(string(raw))))
	return signing + "." + base64.RawURLEncoding.EncodeToString(ed25519.Sign(h.ring.Current.Private, []byte(signing)))
}

// TestGatewayRefusesClaimsItDoesNotEnforce is redteam6 #3, #4 and #5
// through a real gateway, each token signed with the coordinator's key:
// a cav caveat (served as if absent: 200 with every record), TP read as
// tp (a token for topic "other" served for orders), the last of two pt
// claims, and a produce under an offset range [0, 1) (it wrote at any
// offset). Each is 401 now, naming the claim.
func TestGatewayRefusesClaimsItDoesNotEnforce(t *testing.T) {
	h := newHarness(t, nil)
	h.produce(0, 3)
	fetchTok, _ := h.mint(capClaims(0))
	produceTok, _ := h.mint(withOps(capClaims(0), "fetch", "produce"))
	appendClaim := func(claim string) func(string) string {
		return func(c string) string { return strings.TrimSuffix(c, "}") + "," + claim + "}" }
	}
	for _, tc := range []struct {
		name, token, says string
		produce           bool
	}{
		{"cav caveat", h.resign(fetchTok, appendClaim(`"cav":[{"max_offset":0,"deny":true}]`)), "claim cav", false},
		{"TP for tp", h.resign(fetchTok, func(c string) string {
			return strings.Replace(c, `"tp":"`+testTopic+`"`, `"tp":"other","TP":"`+testTopic+`"`, 1)
		}), `unknown claim \"TP\"`, false},
		{"pt twice, the last 0", h.resign(fetchTok, func(c string) string { return strings.Replace(c, `"pt":0`, `"pt":1,"pt":0`, 1) }), `duplicate claim \"pt\"`, false},
		{"produce under an offset range", h.resign(produceTok, appendClaim(`"off":[0,1]`)), "bounds reads only", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r response
			if tc.produce {
				r = h.do(http.MethodPost, recordsURL(0), tc.token, strings.NewReader(`{"records":[{"value":"eA=="}]}`), "Content-Type", "application/json")
			} else {
				r = h.get(tc.token, recordsPath(0, "offset=0"))
			}
			expectError(t, r, http.StatusUnauthorized, api.CodeUnauthorized)
			if !strings.Contains(string(r.body), tc.says) {
				t.Fatalf("body %s, want it to say %s", r.body, tc.says)
			}
		})
	}
	if r := h.get(fetchTok, recordsPath(0, "offset=0")); r.status != 200 {
		t.Fatalf("the minted token: %d %s", r.status, r.body)
	}
}
