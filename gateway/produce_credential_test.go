package gateway

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/ocap"
)

// mintCredential mints a client credential for topics with ops (nil:
// the default, consume only) issued at iat.
func (h *harness) mintCredential(topics []string, ops []string, iat time.Time, ttl time.Duration) (string, *ocap.Claims) {
	h.t.Helper()
	c := ocap.Claims{Subject: "svc", Groups: []string{"*"}, Topics: topics}
	if ops != nil {
		var err error
		if c.Ops, err = ocap.ParseClientOps(ops); err != nil {
			h.t.Fatal(err)
		}
	}
	tok, claims, err := h.minter.Mint(ocap.KindClient, c, iat, ttl)
	if err != nil {
		h.t.Fatal(err)
	}
	return tok, claims
}

const oneRecord = `{"records":[{"key":"azE=","value":"djE="}]}`

func (h *harness) produceWith(token string, topic string, p int32) response {
	h.t.Helper()
	path := "/v1/topics/" + topic + "/partitions/" + strconv.Itoa(int(p)) + "/records"
	return h.do(http.MethodPost, path, token, strings.NewReader(oneRecord), "Content-Type", "application/json")
}

// TestCredentialProducesOverHTTP: a client credential whose ops include
// produce and whose topics name the topic produces to any partition of
// it over HTTP, as it does through the Kafka listener (newuser3 #3: it
// was refused 401 "join a group with it", a dead end for a producer).
func TestCredentialProducesOverHTTP(t *testing.T) {
	h := newHarness(t, nil)
	cred, _ := h.mintCredential([]string{testTopic}, []string{"consume", "produce"}, time.Now(), time.Hour)
	for _, p := range []int32{1, 3} {
		r := h.produceWith(cred, testTopic, p)
		var pr api.ProduceResponse
		if r.status != http.StatusOK || json.Unmarshal(r.body, &pr) != nil || pr.Count != 1 || pr.BaseOffset != 0 {
			t.Fatalf("produce to %s/%d with a produce credential: %d %s", testTopic, p, r.status, r.body)
		}
		fetch, _ := h.mint(capClaims(p))
		f := h.get(fetch, recordsPath(p, "offset=0")).fetch(t)
		if len(f.Records) != 1 || string(f.Records[0].Key) != "k1" || string(f.Records[0].Value) != "v1" {
			t.Fatalf("fetched from %s/%d: %+v", testTopic, p, f.Records)
		}
	}
	// A body over the pre-auth cap (4 KiB) is read for a produce
	// credential as for a produce capability.
	big := `{"records":[{"value":"` + strings.Repeat("eHh4", 4<<10) + `"}]}`
	if r := h.do(http.MethodPost, recordsURL(1), cred, strings.NewReader(big), "Content-Type", "application/json"); r.status != http.StatusOK {
		t.Fatalf("16 KiB produce with a produce credential: %d %s", r.status, r.body)
	}
	consumeOnly, _ := h.mintCredential([]string{testTopic}, []string{"consume"}, time.Now(), time.Hour)
	expectError(t, h.do(http.MethodPost, recordsURL(1), consumeOnly, strings.NewReader(big), "Content-Type", "application/json"),
		http.StatusRequestEntityTooLarge, api.CodeBodyTooLarge)
	// A credential never fetches, even one that may produce.
	r := h.get(cred, recordsPath(1, "offset=0"))
	expectError(t, r, http.StatusUnauthorized, api.CodeUnauthorized)
	if !strings.Contains(string(r.body), "not a capability") {
		t.Fatalf("fetch with a credential: %s", r.body)
	}
}

// TestCredentialProduceAttacks: every credential or token that may not
// write to the topic is refused with the documented status and code, and
// nothing is written.
func TestCredentialProduceAttacks(t *testing.T) {
	h := newHarness(t, nil)
	now := time.Now()
	consumeOnly, _ := h.mintCredential([]string{testTopic}, []string{"consume"}, now, time.Hour)
	defaultOps, _ := h.mintCredential([]string{testTopic}, nil, now, time.Hour)
	otherTopic, _ := h.mintCredential([]string{"payments"}, []string{"consume", "produce"}, now, time.Hour)
	pattern, _ := h.mintCredential([]string{"ord*"}, []string{"consume", "produce"}, now, time.Hour)
	everything, _ := h.mintCredential([]string{"*"}, []string{"consume", "produce"}, now, time.Hour)
	expired, _ := h.mintCredential([]string{testTopic}, []string{"consume", "produce"}, now.Add(-2*time.Hour), time.Hour)
	state, _ := h.mintCredential([]string{"capgate-state-x", "__consumer_offsets"}, []string{"consume", "produce"}, now, time.Hour)
	member, _, err := h.minter.Mint(ocap.KindMember, ocap.Claims{Subject: "member-1", Group: "g"}, now, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	forged := forgedCredential(t)
	idp := idpShapedToken()
	for _, tc := range []struct {
		name   string
		token  string
		topic  string
		status int
		code   api.Code
		says   string
	}{
		{"consume-only credential", consumeOnly, testTopic, http.StatusForbidden, api.CodeForbidden, "does not allow produce"},
		{"credential without ops (consume only)", defaultOps, testTopic, http.StatusForbidden, api.CodeForbidden, "does not allow produce"},
		{"credential for another topic", otherTopic, testTopic, http.StatusForbidden, api.CodeForbidden, "does not name topic"},
		{"credential naming the topic by a pattern", pattern, testTopic, http.StatusForbidden, api.CodeForbidden, "pattern"},
		{"credential for every topic (*)", everything, testTopic, http.StatusForbidden, api.CodeForbidden, "pattern"},
		{"expired credential", expired, testTopic, http.StatusUnauthorized, api.CodeTokenExpired, "expired"},
		{"credential to a capgate state log", state, "capgate-state-x", http.StatusForbidden, api.CodeForbidden, "internal"},
		{"credential to Kafka's own topic", state, "__consumer_offsets", http.StatusForbidden, api.CodeForbidden, "internal"},
		{"member token", member, testTopic, http.StatusUnauthorized, api.CodeUnauthorized, "member token cannot produce"},
		{"forged credential", forged, testTopic, http.StatusUnauthorized, api.CodeUnauthorized, ""},
		{"IdP token", idp, testTopic, http.StatusUnauthorized, api.CodeUnauthorized, "through the gateway's Kafka listener"},
	} {
		r := h.produceWith(tc.token, tc.topic, 0)
		expectError(t, r, tc.status, tc.code)
		if !strings.Contains(string(r.body), tc.says) || strings.Contains(string(r.body), "join a group") {
			t.Errorf("%s: %s, want it to say %q and not send a producer to join", tc.name, r.body, tc.says)
		}
	}
	fetch, _ := h.mint(capClaims(0))
	if f := h.get(fetch, recordsPath(0, "offset=0")).fetch(t); len(f.Records) != 0 {
		t.Fatalf("refused produces wrote %d records", len(f.Records))
	}
}

// forgedCredential is a credential of the right shape signed by a key the
// gateway does not know under a kid it does not know.
func forgedCredential(t *testing.T) string {
	t.Helper()
	ring, err := ocap.NewKeyRing(rand.Reader, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	m, err := ocap.NewMinter(testVerifierConfig(), ring, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := m.Mint(ocap.KindClient, ocap.Claims{Subject: "svc", Groups: []string{"*"}, Topics: []string{testTopic}, Ops: ocap.ClientOpsAll}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestDeniedCredentialCannotProduce: a produce credential whose jti the
// coordinator denied (capgate admin revoke-capability <jti>) is refused
// 409 capability_revoked from the sync that carries the deny on.
func TestDeniedCredentialCannotProduce(t *testing.T) {
	h := newHarness(t, nil)
	cred, claims := h.mintCredential([]string{testTopic}, []string{"consume", "produce"}, time.Now(), time.Hour)
	if r := h.produceWith(cred, testTopic, 2); r.status != http.StatusOK {
		t.Fatalf("produce before the deny: %d %s", r.status, r.body)
	}
	seq := h.sync.push(api.SyncResponse{Denied: []api.Denied{{JTI: claims.ID, Exp: int64(claims.ExpiresAt)}}})
	h.sync.waitAck(t, seq)
	r := h.produceWith(cred, testTopic, 2)
	expectError(t, r, http.StatusConflict, api.CodeCapabilityRevoked)
	if !strings.Contains(string(r.body), "denied") {
		t.Fatalf("denied credential: %s", r.body)
	}
}

// TestCredentialProduceRateLimited: a live QoS override selecting the
// credential (by jti) limits its produces as it limits a capability's.
func TestCredentialProduceRateLimited(t *testing.T) {
	h := newHarness(t, nil)
	cred, claims := h.mintCredential([]string{testTopic}, []string{"consume", "produce"}, time.Now(), time.Hour)
	seq := h.sync.push(api.SyncResponse{QoS: []api.QoSOverride{{ID: "slow", Selector: api.QoSSelector{JTI: claims.ID}, MaxBytesPerSec: 10, Until: time.Now().Add(time.Hour).Unix()}}})
	h.sync.waitAck(t, seq)
	if r := h.produceWith(cred, testTopic, 0); r.status != http.StatusOK {
		t.Fatalf("first produce: %d %s", r.status, r.body)
	}
	r := h.produceWith(cred, testTopic, 0)
	expectError(t, r, http.StatusTooManyRequests, api.CodeRateLimited)
	if r.header.Get("Retry-After") == "" {
		t.Fatalf("429 without Retry-After: %v", r.header)
	}

	// An override selecting a topic and partition selects a
	// credential's produces there, as it selects a capability's.
	other, _ := h.mintCredential([]string{testTopic}, []string{"consume", "produce"}, time.Now(), time.Hour)
	p := int32(2)
	seq = h.sync.push(api.SyncResponse{QoS: []api.QoSOverride{{ID: "slow-p2", Selector: api.QoSSelector{Topic: testTopic, Partition: &p}, MaxBytesPerSec: 10, Until: time.Now().Add(time.Hour).Unix()}}})
	h.sync.waitAck(t, seq)
	if r := h.produceWith(other, testTopic, 2); r.status != http.StatusOK {
		t.Fatalf("first produce to %s/2: %d %s", testTopic, r.status, r.body)
	}
	expectError(t, h.produceWith(other, testTopic, 2), http.StatusTooManyRequests, api.CodeRateLimited)
	if r := h.produceWith(other, testTopic, 3); r.status != http.StatusOK {
		t.Fatalf("produce to %s/3, which the override does not select: %d %s", testTopic, r.status, r.body)
	}
}

// idpShapedToken is a JWT as an OIDC issuer signs it (RS256, typ JWT, an
// https iss); its signature is never looked at.
func idpShapedToken() string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256","typ":"JWT","kid":"k1"}`)) + "." +
		enc([]byte(`{"iss":"https://idp.example","sub":"svc","aud":"capgate","exp":4102444800}`)) + "." + enc([]byte("sig"))
}

// TestVerifiedCredentialOutlivesAForgedFlood (redteam9 #2): a client
// credential that verified once is cached as capabilities are, so an
// outsider's forged tokens — naming the credential's own issuer and
// subject, on large POSTs that spend the pre-auth check's one budget and
// that holder's bucket — cannot make its next large produce refused.
// Before, credentials were verified on every request: during the flood
// its 16 KiB produce got 413 body_too_large, which the SDK does not retry.
func TestVerifiedCredentialOutlivesAForgedFlood(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.AuthFailuresPerSecond, c.AuthFailureBurst = 0.001, 3 })
	cred, claims := h.mintCredential([]string{testTopic}, []string{"consume", "produce"}, time.Now(), time.Hour)
	big := `{"records":[{"value":"` + strings.Repeat("eHh4", 4<<10) + `"}]}`
	if r := h.do(http.MethodPost, recordsURL(1), cred, strings.NewReader(big), "Content-Type", "application/json"); r.status != http.StatusOK {
		t.Fatalf("16 KiB produce with a produce credential: %d %s", r.status, r.body)
	}
	enc := base64.RawURLEncoding.EncodeToString
	forged := enc([]byte(`{"alg":"EdDSA","typ":"`+string(ocap.KindClient)+`"}`)) + "." +
		enc(fmt.Appendf(nil, `{"iss":%q,"sub":%q}`, claims.Issuer, claims.Subject)) + ".AAAA"
	for range 20 {
		h.do(http.MethodPost, recordsURL(1), forged, strings.NewReader(big), "Content-Type", "application/json")
	}
	if r := h.do(http.MethodPost, recordsURL(1), cred, strings.NewReader(big), "Content-Type", "application/json"); r.status != http.StatusOK {
		t.Fatalf("16 KiB produce with the same credential after a forged flood naming it: %d %s", r.status, r.body)
	}
}
