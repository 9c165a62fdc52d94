package gateway

import (
	"crypto/rand"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/ocap"
)

// TestEveryRejectionReason walks the documented refusals of a fetch (and
// produce's op check) through a real gateway: each gets its status, error
// code and headers.
func TestEveryRejectionReason(t *testing.T) {
	h := newHarness(t, nil)
	h.produce(0, 3)
	good := capClaims(0)
	mint := func(edit func(*ocap.Claims)) string {
		c := good
		edit(&c)
		tok, _ := h.mint(c)
		return tok
	}
	same := func(*ocap.Claims) {}
	deniedJTI, _ := h.minter.NewJTI()
	ancestorJTI, _ := h.minter.NewJTI()
	seq := h.sync.push(api.SyncResponse{
		Fences:         []api.Fence{{Group: "g", Topic: testTopic, Partition: 0, Epoch: 3}},
		Denied:         []api.Denied{{JTI: deniedJTI, Exp: time.Now().Add(time.Hour).Unix()}, {JTI: ancestorJTI, Exp: time.Now().Add(time.Hour).Unix()}},
		RevokedMembers: []api.RevokedMember{{Group: "g", MemberID: "zombie", Until: time.Now().Add(time.Hour).Unix()}},
	})
	h.sync.waitAck(t, seq)
	good.Epoch = 3

	other, err := ocap.NewKeyRing(rand.Reader, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	forger, _ := ocap.NewMinter(testVerifierConfig(), other, rand.Reader)
	forged, _, _ := forger.Mint(ocap.KindCapability, good, time.Now(), time.Minute)
	expired, _, _ := h.minter.Mint(ocap.KindCapability, good, time.Now().Add(-10*time.Minute), time.Minute)
	wrongAud, _ := ocap.NewMinter(ocap.VerifierConfig{Issuer: testIssuer, Audience: "elsewhere", Leeway: time.Second, MaxLease: time.Hour}, h.ring, rand.Reader)
	otherAudience, _, _ := wrongAud.Mint(ocap.KindCapability, good, time.Now(), time.Minute)

	cases := []struct {
		name   string
		auth   string // full Authorization header; "" for none
		path   string
		status int
		code   api.Code
	}{
		{"allowed", "Bearer " + mint(same), recordsPath(0, "offset=0"), 200, ""},
		{"no token", "", recordsPath(0, "offset=0"), 401, api.CodeUnauthorized},
		{"not bearer", "Basic dXNlcjpwYXNz", recordsPath(0, "offset=0"), 401, api.CodeUnauthorized},
		{"empty bearer", "Bearer ", recordsPath(0, "offset=0"), 401, api.CodeUnauthorized},
		{"garbage token", "Bearer not.a.token", recordsPath(0, "offset=0"), 401, api.CodeUnauthorized},
		{"forged signature", "Bearer " + forged, recordsPath(0, "offset=0"), 401, api.CodeUnauthorized},
		{"other audience", "Bearer " + otherAudience, recordsPath(0, "offset=0"), 401, api.CodeUnauthorized},
		{"expired", "Bearer " + expired, recordsPath(0, "offset=0"), 401, api.CodeTokenExpired},
		{"wrong topic", "Bearer " + mint(func(c *ocap.Claims) { c.Topic = "payments" }), recordsPath(0, "offset=0"), 403, api.CodeForbidden},
		{"wrong partition", "Bearer " + mint(same), recordsPath(1, "offset=0"), 403, api.CodeForbidden},
		{"wrong op", "Bearer " + mint(func(c *ocap.Claims) { c.Ops = ocap.Ops(ocap.OpProduce) }), recordsPath(0, "offset=0"), 403, api.CodeForbidden},
		{"outside offset range", "Bearer " + mint(func(c *ocap.Claims) { c.Offsets = &ocap.OffsetRange{From: 1, To: 2} }), recordsPath(0, "offset=0"), 403, api.CodeForbidden},
		{"fenced epoch", "Bearer " + mint(func(c *ocap.Claims) { c.Epoch = 2 }), recordsPath(0, "offset=0"), 409, api.CodeCapabilityRevoked},
		{"denied jti", "Bearer " + mint(func(c *ocap.Claims) { c.ID = deniedJTI }), recordsPath(0, "offset=0"), 409, api.CodeCapabilityRevoked},
		{"denied ancestor", "Bearer " + mint(func(c *ocap.Claims) { c.Chain = []string{ancestorJTI} }), recordsPath(0, "offset=0"), 409, api.CodeCapabilityRevoked},
		{"revoked member", "Bearer " + mint(func(c *ocap.Claims) { c.Subject = "zombie" }), recordsPath(0, "offset=0"), 409, api.CodeCapabilityRevoked},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var r response
			if tc.auth == "" {
				r = h.get("", tc.path)
			} else {
				r = h.get("", tc.path, "Authorization", tc.auth)
			}
			if tc.status == 200 {
				if r.status != 200 {
					t.Fatalf("got %d %s", r.status, r.body)
				}
				return
			}
			expectError(t, r, tc.status, tc.code)
			if wa := r.header.Get("WWW-Authenticate"); (tc.status == 401) != strings.HasPrefix(wa, "Bearer") {
				t.Fatalf("WWW-Authenticate %q on %d", wa, tc.status)
			}
		})
	}
	t.Run("produce without the produce op", func(t *testing.T) {
		r := h.do(http.MethodPost, recordsURL(0), mint(same), strings.NewReader(`{"records":[{"value":"eA=="}]}`), "Content-Type", "application/json")
		expectError(t, r, http.StatusForbidden, api.CodeForbidden)
	})
}

func TestRateLimitedCapability(t *testing.T) {
	h := newHarness(t, nil)
	h.produce(0, 3)
	c := capClaims(0)
	c.QoS = &ocap.QoS{MaxBytesPerSec: 50}
	tok, _ := h.mint(c)
	if r := h.get(tok, recordsPath(0, "offset=0")); r.status != 200 || len(r.body) <= 50 {
		t.Fatalf("first fetch: %d, %d bytes (want > the 50 B/s rate)", r.status, len(r.body))
	}
	r := h.get(tok, recordsPath(0, "offset=0"))
	expectError(t, r, http.StatusTooManyRequests, api.CodeRateLimited)
	if s, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || s < 1 {
		t.Fatalf("Retry-After %q", r.header.Get("Retry-After"))
	}

	// A live override limits a capability that carries no rate of its own.
	free, freeClaims := h.mint(capClaims(0))
	if r := h.get(free, recordsPath(0, "offset=0")); r.status != 200 {
		t.Fatalf("unlimited capability: %d", r.status)
	}
	seq := h.sync.push(api.SyncResponse{QoS: []api.QoSOverride{{ID: "slow", Selector: api.QoSSelector{JTI: freeClaims.ID}, MaxBytesPerSec: 10, Until: time.Now().Add(time.Hour).Unix()}}})
	h.sync.waitAck(t, seq)
	h.get(free, recordsPath(0, "offset=0"))
	expectError(t, h.get(free, recordsPath(0, "offset=0")), http.StatusTooManyRequests, api.CodeRateLimited)
}

// TestWrongTokenKindSaysWhatToDo: a client credential or a member token
// presented where a capability belongs (credentials.env exports
// CAPGATE_CREDENTIAL, a new user's first try) is 401 saying what it is
// and where capabilities come from, not golang-jwt's "error while
// executing keyfunc".
func TestWrongTokenKindSaysWhatToDo(t *testing.T) {
	h := newHarness(t, nil)
	for kind, want := range map[ocap.Kind]string{ocap.KindClient: "client credential", ocap.KindMember: "member token"} {
		c := ocap.Claims{Subject: "svc", Groups: []string{"g"}, Topics: []string{testTopic}}
		if kind == ocap.KindMember {
			c = ocap.Claims{Subject: "member-1", Group: "g"}
		}
		tok, _, err := h.minter.Mint(kind, c, time.Now(), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		r := h.get(tok, recordsPath(0, "offset=0"))
		expectError(t, r, http.StatusUnauthorized, api.CodeUnauthorized)
		for _, s := range []string{want, "not a capability", "join"} {
			if !strings.Contains(string(r.body), s) {
				t.Errorf("%s at the gateway: %s, want it to say %q", kind, r.body, s)
			}
		}
		if strings.Contains(string(r.body), "keyfunc") {
			t.Errorf("%s at the gateway: %s", kind, r.body)
		}
	}
}

// TestForbiddenSaysWhatTheCapabilityCovers: a 403 names what the
// capability does cover (its holder can decode it anyway), so a client
// fetching the wrong partition or asking the wrong op sees its mistake.
func TestForbiddenSaysWhatTheCapabilityCovers(t *testing.T) {
	h := newHarness(t, nil)
	c := capClaims(0)
	c.Offsets = &ocap.OffsetRange{From: 0, To: 100}
	tok, _ := h.mint(c)
	for _, path := range []string{recordsPath(1, "offset=0"), "/v1/topics/payments/partitions/0/records?offset=0", recordsPath(0, "offset=200")} {
		r := h.get(tok, path)
		expectError(t, r, http.StatusForbidden, api.CodeForbidden)
		var e struct {
			Error struct {
				Capability *struct {
					Topic     string   `json:"topic"`
					Partition int32    `json:"partition"`
					Ops       []string `json:"ops"`
					From      int64    `json:"offset_from"`
					To        int64    `json:"offset_to"`
				} `json:"capability"`
			} `json:"error"`
		}
		if err := json.Unmarshal(r.body, &e); err != nil || e.Error.Capability == nil || e.Error.Capability.Topic != testTopic ||
			e.Error.Capability.Partition != 0 || len(e.Error.Capability.Ops) != 1 || e.Error.Capability.To != 100 {
			t.Errorf("GET %s: %s, want details naming %s/0, ops [fetch], offsets [0, 100)", path, r.body, testTopic)
		}
	}
}
