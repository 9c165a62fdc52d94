package gateway

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestCredentialProduceTenantIsTheCredential is redteam10 #1, the attack
// as its test: a client credential's produces counted in flight against
// the tenant of its sub — its free --name — so anyone holding a
// credential of the same name (another tenant's), or an admin grant to
// a holder of that name, used up its max_inflight_fetches_per_tenant and
// its produces were 429 too_many_fetches. A credential's tenant is the
// credential (its jti; an OAuth client's every token: its sub
// "oauth:<client_id>"), as the coordinator and the Kafka listener count
// it, and as its members' capabilities carry it (tnt).
func TestCredentialProduceTenantIsTheCredential(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxInflightFetchesPerTenant = 1 })
	attacker, _ := h.mintCredential([]string{testTopic}, []string{"consume", "produce"}, time.Now(), time.Hour)
	victim, _ := h.mintCredential([]string{testTopic}, []string{"consume", "produce"}, time.Now(), time.Hour)

	// An admin grant to a holder named as the victim's credential ("svc")
	// long-polls: the victim's produce is its own tenant's.
	grant, _ := h.mint(withHolder(capClaims(1), "svc"))
	release := h.holdPolls(grant, 1, 1)
	waitFor(t, "the grant's poll in flight", func() bool { return h.gw.inflight.count() == 1 })
	if r := h.produceTopic(victim, testTopic, oneRecord); r.status != http.StatusOK {
		t.Fatalf("a credential's produce while a grant to a holder of its name long-polls: %d %s", r.status, r.body)
	}
	release()
	waitFor(t, "the poll ended", func() bool { return h.gw.inflight.count() == 0 })

	// Another credential of the same name holds a produce in flight.
	answered, held := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	h.gw.afterProduce = func() {
		if first.CompareAndSwap(false, true) {
			close(answered)
			<-held
		}
	}
	defer close(held)
	done := make(chan response, 1)
	go func() {
		done <- h.do(http.MethodPost, recordsURL(0), attacker, strings.NewReader(oneRecord), "Content-Type", "application/json")
	}()
	<-answered
	if r := h.produceWith(victim, testTopic, 2); r.status != http.StatusOK {
		t.Fatalf("a credential's produce while a same-named credential's is in flight: %d %s", r.status, r.body)
	}
	// The attacker's own second produce is its tenant's, which is full.
	expectError(t, h.produceWith(attacker, testTopic, 3), http.StatusTooManyRequests, "too_many_fetches")
}
