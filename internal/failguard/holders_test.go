package failguard

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// jwt is an unsigned JWT-shaped token claiming iss and sub (the guard
// reads the claim; the verifier, not the guard, checks the signature).
func jwt(iss, sub string, extra ...string) string {
	enc := base64.RawURLEncoding.EncodeToString
	payload := fmt.Sprintf(`{"iss":%q,"sub":%q%s}`, iss, sub, strings.Join(extra, ""))
	return enc([]byte(`{"alg":"EdDSA","kid":"k1"}`)) + "." + enc([]byte(payload)) + "." + enc([]byte("sig"))
}

// verified is what a server does once token verified from addr: its
// holder (iss and sub, here as Claimed reads them) is remembered there.
func verified(t *testing.T, g *Guard, addr netip.Addr, token string, now time.Time) {
	t.Helper()
	h, ok := Claimed(token)
	if !ok {
		t.Fatalf("no holder in %q", token)
	}
	g.Verified(addr, h, now)
}

func holderGuard() *Guard {
	return New(1, 2, 100).Remember(Holders{PerSecond: 0.5, Burst: 2, PerAddress: 3, Max: 5, TTL: time.Hour})
}

// spend fails addr's whole address budget.
func spend(g *Guard, addr netip.Addr, now time.Time) {
	for {
		if _, blocked := g.Blocked(addr, now); blocked {
			return
		}
		g.Failed(addr, now)
	}
}

func admitted(t *testing.T, g *Guard, addr netip.Addr, token string, now time.Time) (Pass, bool) {
	t.Helper()
	p, err := g.Admit(addr, token, now)
	if err != nil && !errors.As(err, new(*Spent)) {
		t.Fatalf("Admit: %v, want nil or a *Spent", err)
	}
	return p, err == nil
}

// TestKnownHolderCheckedPastSpentAddress is the attack at the guard: a
// neighbour spends the address's budget; a holder verified from that
// address before still has its new tokens admitted (on the holder path),
// a holder never seen there is refused and told why, and the same holder
// from another spent address is not known there.
func TestKnownHolderCheckedPastSpentAddress(t *testing.T) {
	g := holderGuard()
	nat, other := netip.MustParseAddr("192.0.2.7"), netip.MustParseAddr("192.0.2.8")
	first := jwt("coord", "member-1")
	p, ok := admitted(t, g, nat, first, t0)
	if !ok || p.OnHolder() {
		t.Fatalf("an unspent address: admitted=%t on holder=%t, want admitted on the address", ok, p.OnHolder())
	}
	verified(t, g, nat, first, t0)
	spend(g, nat, t0)
	spend(g, other, t0)

	renewed := jwt("coord", "member-1", `,"jti":"second"`)
	p, ok = admitted(t, g, nat, renewed, t0)
	if !ok || !p.OnHolder() {
		t.Fatalf("a known holder's renewed token past the spent budget: admitted=%t on holder=%t", ok, p.OnHolder())
	}
	_, err := g.Admit(nat, jwt("coord", "member-2"), t0)
	if err == nil || !strings.Contains(err.Error(), "checked only if its holder was verified from this address before") {
		t.Fatalf("an unknown holder past the spent budget: %v, want a refusal saying only known holders are checked", err)
	}
	if _, ok := admitted(t, g, other, renewed, t0); ok {
		t.Fatal("a holder verified at one address is known at another")
	}
	if _, ok := admitted(t, g, nat, jwt("other-issuer", "member-1"), t0); ok {
		t.Fatal("another issuer's holder of the same sub is known")
	}
	if s := g.Stats(); s.Admitted != 1 || s.Holders != 1 {
		t.Fatalf("stats %+v, want 1 admitted, 1 holder", s)
	}
}

// TestForgeriesNamingAHolderSpendOnlyItsBudget: an attacker forging
// tokens that name a known holder spends that holder's small bucket
// (Burst) and nothing else — another known holder at the address is still
// admitted, and the address's own budget is untouched.
func TestForgeriesNamingAHolderSpendOnlyItsBudget(t *testing.T) {
	g := holderGuard()
	nat := netip.MustParseAddr("192.0.2.7")
	for _, sub := range []string{"victim", "bystander"} {
		tok := jwt("coord", sub)
		admitted(t, g, nat, tok, t0)
		verified(t, g, nat, tok, t0)
	}
	spend(g, nat, t0)
	checks := 0
	for i := range 50 {
		forged := jwt("coord", "victim", fmt.Sprintf(`,"n":%d`, i))
		p, ok := admitted(t, g, nat, forged, t0)
		if !ok {
			continue
		}
		checks++
		g.Rejected(p, t0)
	}
	if checks != 2 {
		t.Fatalf("%d forgeries naming the victim were checked, want its burst 2", checks)
	}
	_, err := g.Admit(nat, jwt("coord", "victim"), t0)
	if err == nil || !strings.Contains(err.Error(), "naming this token's holder") {
		t.Fatalf("the victim past its own budget: %v", err)
	}
	if _, ok := admitted(t, g, nat, jwt("coord", "bystander"), t0); !ok {
		t.Fatal("another known holder was refused: the forgeries spent more than the victim's bucket")
	}
	if wait, _ := g.Blocked(nat, t0.Add(time.Second)); wait != 0 {
		t.Fatalf("the address is still blocked after its own refill (1/s): the holder's failures were charged to it (%v)", wait)
	}
	if _, ok := admitted(t, g, nat, jwt("coord", "victim"), t0.Add(2*time.Second)); !ok {
		t.Fatal("the victim's bucket did not refill")
	}
	if s := g.Stats(); s.Refused != 48+1 {
		t.Fatalf("%d refusals on the holder path counted, want 49", s.Refused)
	}
}

// TestVaryingClaimsBuysNoChecks: past a spent address budget, a flood of
// tokens each claiming a different holder (or none, or garbage) gets no
// check at all; only holders that verified can enter the table.
func TestVaryingClaimsBuysNoChecks(t *testing.T) {
	g := holderGuard()
	nat := netip.MustParseAddr("2001:db8::1")
	tok := jwt("coord", "member-1")
	admitted(t, g, nat, tok, t0)
	verified(t, g, nat, tok, t0)
	spend(g, nat, t0)
	for i := range 1000 {
		for _, forged := range []string{jwt("coord", fmt.Sprintf("m-%d", i)), jwt("coord", ""), "garbage", "a.!!!.b", "a.e30.b"} {
			if _, ok := admitted(t, g, netip.MustParseAddr("2001:db8::2"), forged, t0); ok {
				t.Fatalf("forgery %q was admitted", forged)
			}
		}
	}
	if s := g.Stats(); s.Admitted != 0 || s.Holders != 1 {
		t.Fatalf("stats %+v: varying claims bought checks or holders", s)
	}
	if _, ok := admitted(t, g, netip.MustParseAddr("2001:db8::ffff"), tok, t0); !ok {
		t.Fatal("a known holder from another address of the /64 was refused")
	}
	huge := jwt("coord", "member-1", `,"pad":"`+strings.Repeat("x", maxClaimedBytes)+`"`)
	if _, ok := admitted(t, g, nat, huge, t0); ok {
		t.Fatal("a token over maxClaimedBytes had its claims read")
	}
}

// TestHoldersBounded: per address at most PerAddress holders and in all
// at most Max (least recently verified dropped first), and a holder not
// verified again for TTL is forgotten.
func TestHoldersBounded(t *testing.T) {
	g := holderGuard() // PerAddress 3, Max 5
	addr := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}) }
	verify := func(a netip.Addr, sub string, now time.Time) {
		tok := jwt("coord", sub)
		if _, err := g.Admit(a, tok, now); err != nil {
			t.Fatalf("verify %s at %v: %v", sub, a, err)
		}
		verified(t, g, a, tok, now)
	}
	for i := range 10 {
		verify(addr(1), fmt.Sprintf("m-%d", i), t0.Add(time.Duration(i)*time.Second))
	}
	if n := g.Stats().Holders; n != 3 {
		t.Fatalf("one address holds %d holders, want PerAddress 3", n)
	}
	for i := range 4 {
		verify(addr(2+i), "x", t0.Add(time.Minute+time.Duration(i)*time.Second))
	}
	if n := g.Stats().Holders; n != 5 {
		t.Fatalf("the table holds %d holders, want Max 5", n)
	}
	now := t0.Add(2 * time.Minute)
	spend(g, addr(1), now)
	if _, ok := admitted(t, g, addr(1), jwt("coord", "m-7"), now); ok {
		t.Fatal("the least recently verified address's oldest holder was kept past Max")
	}
	if _, ok := admitted(t, g, addr(1), jwt("coord", "m-9"), now); !ok {
		t.Fatal("the most recently verified holder of address 1 was dropped")
	}
	spend(g, addr(5), now)
	if _, ok := admitted(t, g, addr(5), jwt("coord", "x"), now); !ok {
		t.Fatal("a holder verified a minute ago is not known")
	}
	later := now.Add(time.Hour)
	spend(g, addr(5), later)
	if _, ok := admitted(t, g, addr(5), jwt("coord", "x"), later); ok {
		t.Fatal("a holder not verified again for TTL is still known")
	}
}

// TestHoldersOff: without Remember, and with the guard off, the holder
// path admits nothing past the budget and keeps nothing.
func TestHoldersOff(t *testing.T) {
	g := New(1, 1, 10)
	a := netip.MustParseAddr("192.0.2.7")
	tok := jwt("coord", "member-1")
	p, _ := admitted(t, g, a, tok, t0)
	verified(t, g, a, tok, t0)
	g.Rejected(p, t0)
	_, err := g.Admit(a, tok, t0)
	if err == nil || err.Error() != (&Spent{Wait: time.Second}).Error() {
		t.Fatalf("a guard without holders past its budget: %v, want the plain refusal", err)
	}
	if s := g.Stats(); s != (HolderStats{}) {
		t.Fatalf("stats %+v without holders", s)
	}
	off := New(0, 1, 1).Remember(Holders{})
	for range 3 {
		p, _ := admitted(t, off, a, tok, t0)
		verified(t, off, a, tok, t0)
		off.Rejected(p, t0)
	}
	if s := off.Stats(); s.Holders != 0 {
		t.Fatal("a guard turned off remembered holders")
	}
}

// BenchmarkAdmitPastSpentBudget: what a token past a spent address
// budget costs the guard — refused at once (the address has no holder),
// its claim read and refused (unknown holder), admitted (known holder) —
// against the Ed25519 check the budget exists to save, in the same run.
func BenchmarkAdmitPastSpentBudget(b *testing.B) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	tok := jwt("coord", "member-1", `,"aud":"cluster","grp":"g","tp":"orders","pt":0,"ep":7,"op":["fetch"],"jti":"AAAAAAAAAAAAAAAAAAAAAA","iat":1800000000,"exp":1800000300`)
	msg := []byte(tok)
	sig := ed25519.Sign(priv, msg)
	g := New(1, 1, 1<<16).Remember(Holders{PerSecond: 1e9, Burst: 1 << 30, PerAddress: 256, Max: 1 << 16, TTL: time.Hour})
	empty, nat := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	h, _ := Claimed(tok)
	g.Verified(nat, h, t0)
	spend(g, empty, t0)
	spend(g, nat, t0)
	unknown := jwt("coord", "member-2")
	for _, c := range []struct {
		name string
		run  func()
	}{
		{"no-holders", func() { _, _ = g.Admit(empty, tok, t0) }},
		{"unknown-holder", func() { _, _ = g.Admit(nat, unknown, t0) }},
		{"known-holder", func() { _, _ = g.Admit(nat, tok, t0) }},
		{"ed25519-verify", func() { ed25519.Verify(pub, msg, sig) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				c.run()
			}
		})
	}
}

// TestOneOwnersHoldersDoNotEvictAnothers is redteam8 #1 at the guard: a
// neighbour whose one credential joins again and again (each join's new
// member vouched at the address, owned by the credential's tenant)
// fills the address's holders; the victim's holder — verified there
// before — stays, so its renewal is still checked once the neighbour
// spends the address's budget. The neighbour's newest members evict its
// own oldest, and members let in by their own member tokens (Pool)
// evict one another, not the victim.
func TestOneOwnersHoldersDoNotEvictAnothers(t *testing.T) {
	g := New(1, 2, 100).Remember(Holders{PerSecond: 0.5, Burst: 2, PerAddress: 8, Max: 100, TTL: time.Hour})
	nat := netip.MustParseAddr("192.0.2.7")
	victim := jwt("coord", "victim")
	verified(t, g, nat, victim, t0)
	neighbour := HolderOf("coord", "", "neighbour-credential-jti")
	for i := range 270 {
		g.VerifiedAs(nat, HolderOf("coord", fmt.Sprintf("neighbour-member-%d", i), ""), neighbour, t0.Add(time.Duration(i+1)*time.Millisecond))
	}
	for i := range 270 {
		g.VerifiedAs(nat, HolderOf("coord", fmt.Sprintf("pooled-member-%d", i), ""), Pool, t0.Add(time.Second+time.Duration(i)*time.Millisecond))
	}
	if s := g.Stats(); s.Holders != 8 {
		t.Fatalf("%d holders at the address, want its cap 8", s.Holders)
	}
	spend(g, nat, t0.Add(2*time.Second))
	if _, ok := admitted(t, g, nat, jwt("coord", "victim", `,"jti":"renewed"`), t0.Add(2*time.Second)); !ok {
		t.Fatal("the victim's renewal was refused: the neighbour's joins pushed its holder out")
	}
	if _, ok := admitted(t, g, nat, jwt("coord", "neighbour-member-269"), t0.Add(2*time.Second)); !ok {
		t.Fatal("the neighbour's newest member was pushed out: its own members must make room among themselves, not all of them")
	}
	if _, ok := admitted(t, g, nat, jwt("coord", "neighbour-member-0"), t0.Add(2*time.Second)); ok {
		t.Fatal("the neighbour's oldest member is still known: its newer ones should have evicted it")
	}
	// With every owner at one holder, the least recently verified goes.
	h := New(1, 2, 100).Remember(Holders{PerSecond: 0.5, Burst: 2, PerAddress: 2, Max: 100, TTL: time.Hour})
	for i, sub := range []string{"a", "b", "c"} {
		verified(t, h, nat, jwt("coord", sub), t0.Add(time.Duration(i)*time.Second))
	}
	spend(h, nat, t0.Add(5*time.Second))
	if _, ok := admitted(t, h, nat, jwt("coord", "a"), t0.Add(5*time.Second)); ok {
		t.Fatal("the least recently verified of single holders was kept")
	}
	if _, ok := admitted(t, h, nat, jwt("coord", "c"), t0.Add(5*time.Second)); !ok {
		t.Fatal("the newest holder was dropped")
	}
}

// TestTenantIsTheHolder is redteam8 #1 at the gateway and #3 for
// capabilities: a token with a tnt claim is held by its tenant, not its
// sub — a credential's 270 members' capabilities are one holder, and a
// forgery naming a victim's member id (sub) without its tenant finds no
// holder (the tenant, a credential's jti, is 128 random bits).
func TestTenantIsTheHolder(t *testing.T) {
	g := holderGuard()
	nat := netip.MustParseAddr("192.0.2.7")
	verified(t, g, nat, jwt("coord", "victim-member", `,"tnt":"victim-jti"`), t0)
	for i := range 270 {
		verified(t, g, nat, jwt("coord", fmt.Sprintf("m%d", i), `,"tnt":"neighbour-jti"`), t0.Add(time.Millisecond))
	}
	if s := g.Stats(); s.Holders != 2 {
		t.Fatalf("%d holders, want 2: one per tenant", s.Holders)
	}
	spend(g, nat, t0)
	if _, ok := admitted(t, g, nat, jwt("coord", "another-victim-member", `,"tnt":"victim-jti"`), t0); !ok {
		t.Fatal("a capability of the victim's tenant for another member was refused")
	}
	if _, ok := admitted(t, g, nat, jwt("coord", "victim-member"), t0); ok {
		t.Fatal("a forgery naming the victim's member id without its tenant was admitted")
	}
	a, _ := Claimed(jwt("coord", "x", `,"tnt":"t"`))
	b, _ := Claimed(jwt("coord", "t"))
	if a == b || a != HolderOf("coord", "y", "t") || b != HolderOf("coord", "t", "") {
		t.Fatal("tenant and subject holders must differ and match HolderOf")
	}
}
