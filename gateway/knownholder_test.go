package gateway

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/ocap"
)

// holderClaims is capClaims(p) held by sub.
func holderClaims(p int32, sub string) ocap.Claims {
	c := capClaims(p)
	c.Subject = sub
	return c
}

// newKafkaBudgetHarness is a ready gateway with the Kafka listener and a
// budget of burst failures per address that does not refill in a test.
func newKafkaBudgetHarness(t *testing.T, burst int) *harness {
	h := newHarnessWith(t, harnessOptions{edit: func(c *Config) {
		c.KafkaListen, c.KafkaFetchLanes = "127.0.0.1:0", 1
		c.AuthFailuresPerSecond, c.AuthFailureBurst = 0.01, burst
	}})
	h.waitReady()
	return h
}

// saslMetadata authenticates to the Kafka listener from ip over SASL
// PLAIN with token as the password and asks for metadata.
func (h *harness) saslMetadata(ip, token string) error {
	h.t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.gw.KafkaAddr()), kgo.Dialer(d.DialContext),
		kgo.SASL(plain.Auth{User: "capgate", Pass: token}.AsMechanism()), kgo.RequestRetries(0))
	if err != nil {
		h.t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = cl.Request(ctx, kmsg.NewPtrMetadataRequest())
	return err
}

// TestNeighbourForgeriesDoNotLockOutAKnownHolder is redteam6 #2 on the
// HTTP fetch: a victim and an attacker share one client address (a NAT).
// The attacker floods forged capabilities (a real kid and claims, a
// wrong signature) until the address's budget is spent and it is refused
// 429 unchecked. The victim, whose capability verified from that address
// before, presents its renewed capability and a new grant (fresh tokens,
// never cached, same member id): both are checked and served. A holder
// never verified from the address is still refused, and the 429 says so.
// Forgeries naming the victim's member id are checked on that holder's
// own small budget (a tenth of the address's) and no more; forgeries
// varying their claims are checked not at all — the verifications the
// attacker gets are counted.
func TestNeighbourForgeriesDoNotLockOutAKnownHolder(t *testing.T) {
	const burst, holderBurst = 20, 2 // the holder's budget: burst/10
	h := newHarness(t, func(c *Config) { c.AuthFailuresPerSecond, c.AuthFailureBurst = 0.01, burst })
	h.produce(0, 3)
	h.produce(1, 3)
	nat := clientFrom("127.0.0.2")
	victim, _ := h.mint(holderClaims(0, "member-victim"))
	bystander, _ := h.mint(holderClaims(0, "member-bystander"))
	for _, tok := range []string{victim, bystander} {
		if r := h.getFrom(nat, tok, recordsPath(0, "offset=0")); r.status != http.StatusOK {
			t.Fatalf("before the attack: %d %s", r.status, r.body)
		}
	}
	attackerOwn, _ := h.mint(holderClaims(0, "member-attacker"))
	for i := range 5 * burst {
		r := h.getFrom(nat, forged(attackerOwn, i), recordsPath(0, "offset=0"))
		if r.status != http.StatusUnauthorized && r.status != http.StatusTooManyRequests {
			t.Fatalf("forgery %d: %d %s", i, r.status, r.body)
		}
	}
	if n := counterValue(t, h.gw.metrics.authFailures); n != burst {
		t.Fatalf("%v forgeries checked, want the address's burst %d", n, burst)
	}

	renewed, _ := h.mint(holderClaims(0, "member-victim"))
	granted, _ := h.mint(holderClaims(1, "member-victim"))
	for name, tok := range map[string]string{"renewed capability": renewed, "new grant": granted} {
		p := int32(0)
		if tok == granted {
			p = 1
		}
		if r := h.getFrom(nat, tok, recordsPath(p, "offset=0")); r.status != http.StatusOK {
			t.Fatalf("the victim's %s from the flooded address: %d %s, want 200", name, r.status, r.body)
		}
	}
	stranger, _ := h.mint(holderClaims(0, "member-never-seen-here"))
	r := h.getFrom(nat, stranger, recordsPath(0, "offset=0"))
	expectError(t, r, http.StatusTooManyRequests, api.CodeRateLimited)
	if !strings.Contains(string(r.body), "checked only if its holder was verified from this address before") {
		t.Fatalf("the refusal of a holder never seen from the address does not say why: %s", r.body)
	}

	// The attacker learns the victim's member id and forges tokens naming
	// it: the victim's own small budget is spent, nothing more.
	for i := range 5 * holderBurst {
		r := h.getFrom(nat, forged(renewed, 1000+i), recordsPath(0, "offset=0"))
		want := http.StatusUnauthorized
		if i >= holderBurst {
			want = http.StatusTooManyRequests
		}
		if r.status != want {
			t.Fatalf("forgery %d naming the victim: %d %s, want %d", i, r.status, r.body, want)
		}
	}
	// And varies the claims: no holder it names was verified here.
	for i := range 50 {
		tok, _ := h.mint(holderClaims(0, fmt.Sprintf("member-%d", i)))
		expectError(t, h.getFrom(nat, forged(tok, 2000+i), recordsPath(0, "offset=0")), http.StatusTooManyRequests, api.CodeRateLimited)
	}
	if n := counterValue(t, h.gw.metrics.authFailures); n != burst+holderBurst {
		t.Fatalf("%v forgeries checked in all, want %d: the address's burst and the named holder's", n, burst+holderBurst)
	}
	bystanderRenewed, _ := h.mint(holderClaims(0, "member-bystander"))
	if r := h.getFrom(nat, bystanderRenewed, recordsPath(0, "offset=0")); r.status != http.StatusOK {
		t.Fatalf("another known holder after the forgeries naming the victim: %d %s", r.status, r.body)
	}
	metrics := string(h.get("", "/metrics").body)
	for _, line := range []string{
		"capgate_gateway_auth_known_holder_admitted_total 5\n", // renewed, granted, 2 forgeries, bystander
		"capgate_gateway_auth_known_holder_throttled_total 8\n",
		"capgate_gateway_auth_known_holders 2\n",
	} {
		if !strings.Contains(metrics, line) {
			t.Errorf("/metrics lacks %q", strings.TrimSpace(line))
		}
	}
}

// TestNeighbourForgeriesOverKafkaDoNotLockOutAKnownHolder: the same on
// the Kafka listener's SASL handshake, which shares the budget: the
// attacker's forged capabilities spend the address's budget, the victim's
// renewed capability (verified from that address before) still
// authenticates, a capability of a holder never seen there does not.
func TestNeighbourForgeriesOverKafkaDoNotLockOutAKnownHolder(t *testing.T) {
	const burst = 10
	h := newKafkaBudgetHarness(t, burst)
	victim, _ := h.mint(holderClaims(0, "member-victim"))
	if err := h.saslMetadata("127.0.0.2", victim); err != nil {
		t.Fatalf("the victim before the attack: %v", err)
	}
	attackerOwn, _ := h.mint(holderClaims(0, "member-attacker"))
	for i := range burst + 2 {
		if err := h.saslMetadata("127.0.0.2", forged(attackerOwn, i)); err == nil {
			t.Fatalf("forged token %d authenticated", i)
		}
	}
	if n := counterValue(t, h.gw.metrics.authThrottled); n < 1 {
		t.Fatal("the flood never spent the address's budget")
	}
	renewed, _ := h.mint(holderClaims(0, "member-victim"))
	if err := h.saslMetadata("127.0.0.2", renewed); err != nil {
		t.Fatalf("the victim's renewed capability from the flooded address: %v", err)
	}
	stranger, _ := h.mint(holderClaims(0, "member-never-seen-here"))
	if err := h.saslMetadata("127.0.0.2", stranger); err == nil {
		t.Fatal("a holder never verified from the flooded address authenticated (was the budget spent?)")
	}
	if n := counterValue(t, h.gw.metrics.authFailures); n != burst {
		t.Fatalf("%v forgeries checked, want the burst %d", n, burst)
	}
}

// tenantClaims is holderClaims(p, sub) granted to tenant's member (tnt).
func tenantClaims(p int32, sub, tenant string) ocap.Claims {
	c := holderClaims(p, sub)
	c.Tenant = tenant
	return c
}

// TestNeighboursOwnCapabilitiesDoNotEvictAKnownHolder is redteam8 #1 at
// the gateway: the known holders of an address are 256 at most, and a
// neighbour with one credential of its own had 300 of its members'
// capabilities (each a holder: its member id) fetched once from the
// shared address, pushing the victim's holder out; its forgeries then
// locked the victim out again. A capability's holder is now its tenant
// (tnt: the credential's jti), so the neighbour's 300 members are one
// holder and the victim's stays — its renewed capability, even for a new
// member of the same credential, is served past the spent budget.
func TestNeighboursOwnCapabilitiesDoNotEvictAKnownHolder(t *testing.T) {
	const burst = 20
	h := newHarness(t, func(c *Config) { c.AuthFailuresPerSecond, c.AuthFailureBurst = 0.01, burst })
	h.produce(0, 1)
	nat := clientFrom("127.0.0.2")
	victim, _ := h.mint(tenantClaims(0, "member-victim", "victim-credential-jti"))
	if r := h.getFrom(nat, victim, recordsPath(0, "offset=0")); r.status != http.StatusOK {
		t.Fatalf("before the attack: %d %s", r.status, r.body)
	}
	for i := range 300 {
		own, _ := h.mint(tenantClaims(0, fmt.Sprintf("member-neighbour-%d", i), "neighbour-credential-jti"))
		if r := h.getFrom(nat, own, recordsPath(0, "offset=0")); r.status != http.StatusOK {
			t.Fatalf("the neighbour's own capability %d: %d %s", i, r.status, r.body)
		}
	}
	attackerOwn, _ := h.mint(tenantClaims(0, "member-neighbour-0", "neighbour-credential-jti"))
	for i := range 2 * burst {
		h.getFrom(nat, forged(attackerOwn, i), recordsPath(0, "offset=0"))
	}
	if n := counterValue(t, h.gw.metrics.authThrottled); n < 1 {
		t.Fatal("the flood never spent the address's budget")
	}
	// redteam8 #3 for capabilities: forgeries naming the victim's member
	// id, without its tenant (128 random bits the neighbour never sees),
	// name no known holder: refused unchecked, the victim's bucket kept.
	failed := counterValue(t, h.gw.metrics.authFailures)
	for i, tnt := range []string{"", "guessed", "neighbour-credential-jti"} {
		for j := range 5 {
			guess, _ := h.mint(tenantClaims(0, "member-victim", tnt))
			h.getFrom(nat, forged(guess, 100+10*i+j), recordsPath(0, "offset=0"))
		}
	}
	if n := counterValue(t, h.gw.metrics.authFailures); n > failed+2 {
		t.Fatalf("%v forgeries naming the victim's member id were checked, want at most the neighbour's own bucket (2)", n-failed)
	}
	for _, sub := range []string{"member-victim", "member-victim-rejoined"} {
		renewed, _ := h.mint(tenantClaims(0, sub, "victim-credential-jti"))
		if r := h.getFrom(nat, renewed, recordsPath(0, "offset=0")); r.status != http.StatusOK {
			t.Fatalf("the victim's renewed capability (%s) after the neighbour's 300 members: %d %s, want 200", sub, r.status, r.body)
		}
	}
	stranger, _ := h.mint(tenantClaims(0, "member-victim", "another-credential-jti"))
	expectError(t, h.getFrom(nat, stranger, recordsPath(0, "offset=0")), http.StatusTooManyRequests, api.CodeRateLimited)
	if !strings.Contains(string(h.get("", "/metrics").body), "capgate_gateway_auth_known_holders 2\n") {
		t.Fatal("want 2 known holders: one per tenant, however many members")
	}
}
