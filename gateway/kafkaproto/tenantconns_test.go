package kafkaproto

import (
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/ocap"
)

// leaseTable authenticates the tokens it lists, each as its claims, for
// a session of its own length from now.
type leaseTable map[string]lease

type lease struct {
	claims *ocap.Claims
	ttl    time.Duration
}

func (lt leaseTable) Authenticate(token string, _ netip.Addr, now time.Time) (*Principal, error) {
	l, ok := lt[token]
	if !ok {
		return nil, ocap.ErrBadType
	}
	return &Principal{Claims: l.claims, Token: token, Expires: now.Add(l.ttl)}, nil
}

// tenantTokens mints, for the tenant of one client credential, the
// credential and a capability of each of n members it joined (a subject
// each, tnt the credential's jti, as the coordinator grants them), and a
// capability of another tenant's member; every session lasts ttl.
func tenantTokens(t *testing.T, n int, ttl time.Duration, table leaseTable) (credential string, members []string, other string) {
	t.Helper()
	now := time.Now()
	m := testMinter(t, now)
	mint := func(kind ocap.Kind, c ocap.Claims) string {
		token, claims, err := m.Mint(kind, c, now, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		table[token] = lease{claims, ttl}
		return token
	}
	credential = mint(ocap.KindClient, ocap.Claims{Subject: "svc", Groups: []string{"*"}, Topics: []string{"*"}})
	jti := table[credential].claims.ID
	p := int32(0)
	for i := range n {
		members = append(members, mint(ocap.KindCapability, ocap.Claims{Subject: "member-" + string(rune('a'+i)), Group: "g", Topic: "orders",
			Partition: &p, Epoch: 1, Ops: ocap.Ops(ocap.OpFetch), Tenant: jti}))
	}
	other = mint(ocap.KindCapability, ocap.Claims{Subject: "member-z", Group: "g", Topic: "orders", Partition: &p, Epoch: 1,
		Ops: ocap.Ops(ocap.OpFetch), Tenant: "another-credential"})
	return credential, members, other
}

// TestOneTenantCannotHoldTheListener is redteam7 #2's first half, the
// attack as its test: one credential's members (a subject each, so
// kafka_max_connections_per_principal does not see them as one) open
// connection after connection. Its connections, its own and its
// members' capabilities' together, stop at kafka_max_connections_per_tenant
// (one more is refused at SASL naming the setting); another tenant still
// gets in. Without the bound the tenant held every slot and the other
// tenant's connection was closed at accept.
func TestOneTenantCannotHoldTheListener(t *testing.T) {
	table := leaseTable{}
	credential, members, other := tenantTokens(t, 4, time.Hour, table)
	cfg := testConfig()
	cfg.MaxConnections, cfg.MaxConnectionsPerPrincipal, cfg.MaxConnectionsPerTenant = 8, 2, 5
	s := startListener(t, cfg, table, nil)
	authenticated := 0
	var refusals []string
	for _, token := range append(slicesRepeat(members, 2), credential) { // 9 attempts: 2 per member, then the credential
		nc, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		resp, err := saslExchange(&testConn{t: t, nc: nc}, token)
		switch {
		case err != nil:
			refusals = append(refusals, err.Error()) // closed at accept: the listener full
		case resp.ErrorCode == 0:
			authenticated++
		case resp.ErrorCode == kerr.SaslAuthenticationFailed.Code && resp.ErrorMessage != nil:
			refusals = append(refusals, *resp.ErrorMessage)
		}
	}
	if authenticated != cfg.MaxConnectionsPerTenant || !strings.Contains(refusals[0], "kafka_max_connections_per_tenant") {
		t.Fatalf("one tenant's 9 connections (4 members × 2, its credential): %d authenticated, refusals %q; want %d, refused naming kafka_max_connections_per_tenant",
			authenticated, refusals, cfg.MaxConnectionsPerTenant)
	}
	victim := dialAuthenticated(t, s, other)
	if _, err := victim.roundTrip(kmsg.NewPtrApiVersionsRequest()); err != nil {
		t.Fatalf("another tenant's connection: %v", err)
	}
	if s.Refused(int(limitPerTenant)) == 0 {
		t.Fatal("refusals per tenant not counted")
	}
}

func slicesRepeat(s []string, n int) []string {
	var out []string
	for _, x := range s {
		for range n {
			out = append(out, x)
		}
	}
	return out
}

// TestExpiredSessionsGiveTheirSlotsBack is redteam7 #2's second half: a
// connection whose session ended (its token expired) and that sends
// nothing is closed at the expiry — before, it kept its slot for
// kafka_idle_timeout (10 min) and a tenant whose tokens had lapsed still
// held the listener. A connection re-authenticated (KIP-368) before the
// expiry stays open past it.
func TestExpiredSessionsGiveTheirSlotsBack(t *testing.T) {
	table := leaseTable{}
	_, members, _ := tenantTokens(t, 3, time.Second, table)
	_, renewed, _ := tenantTokens(t, 1, time.Hour, table)
	table[renewed[0]] = lease{claims: withSubject(table[renewed[0]].claims, table[members[2]].claims.Subject), ttl: time.Hour}
	cfg := testConfig()
	cfg.MaxConnections = 3
	s := startListener(t, cfg, table, nil)
	var conns []*testConn
	for _, token := range members {
		conns = append(conns, dialAuthenticated(t, s, token))
	}
	if code := saslV1(t, conns[2], renewed[0]); code != 0 { // re-authenticated within the session
		t.Fatalf("re-authentication: %d", code)
	}
	start := time.Now()
	for i, r := range conns[:2] {
		if !r.closed() { // waits for the close, 5 s at most
			t.Fatalf("connection %d: open %v after its session ended, want it closed at the expiry", i, time.Since(start))
		}
	}
	if _, err := conns[2].roundTrip(kmsg.NewPtrApiVersionsRequest()); err != nil {
		t.Fatalf("the re-authenticated connection after the first session's end: %v, want it open", err)
	}
	dialAuthenticated(t, s, members[0]) // a slot again (the listener holds 3)
	if s.Expired() != 2 {
		t.Fatalf("sessions expired: %d, want 2", s.Expired())
	}
}

// withSubject is a copy of c with subject sub (a renewed token of the
// same member).
func withSubject(c *ocap.Claims, sub string) *ocap.Claims {
	d := *c
	d.Subject = sub
	return &d
}

// TestFewTenantsCannotHoldTheListener is redteam12 #4, the attack as its
// test: two tenants, each within kafka_max_connections_per_tenant, hold
// every kafka_max_connections slot authenticated (four at the defaults,
// 4 × 256 = 1,024). A third tenant's connection was closed at accept for
// as long as they kept theirs. Now it connects into the handshake
// reserve and, at SASL, takes the place of the newest connection of the
// tenant holding the most; a holder reconnecting into that place is
// refused at SASL (no tenant holds more than one more than it), naming
// kafka_max_connections, and counted under fair_share.
func TestFewTenantsCannotHoldTheListener(t *testing.T) {
	table := leaseTable{}
	_, a, _ := tenantTokens(t, 4, time.Hour, table)
	_, b, _ := tenantTokens(t, 4, time.Hour, table)
	_, victims, _ := tenantTokens(t, 1, time.Hour, table)
	cfg := testConfig()
	cfg.MaxConnections, cfg.MaxConnectionsPerTenant = 8, 4
	s := startListener(t, cfg, table, nil)
	var held []*testConn
	for _, token := range append(a, b...) {
		held = append(held, dialAuthenticated(t, s, token))
	}
	victim := dialAuthenticated(t, s, victims[0])
	if _, err := victim.roundTrip(kmsg.NewPtrApiVersionsRequest()); err != nil {
		t.Fatalf("a third tenant beside two holding every slot: %v", err)
	}
	s.mu.Lock()
	nA, nB := s.byTenant[tenantKey(table[a[0]].claims)], s.byTenant[tenantKey(table[b[0]].claims)]
	s.mu.Unlock()
	loser, closed := a, held[3] // the newest connection of the tenant it was taken from
	if nB < nA {
		loser, closed = b, held[7]
	}
	if nA+nB != 7 || !closed.closed() {
		t.Fatalf("the holders' connections after the third tenant's: %d and %d, want one of them closed (7)", nA, nB)
	}
	nc, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	resp, err := saslExchange(&testConn{t: t, nc: nc}, loser[3])
	if err != nil || resp.ErrorCode == 0 || resp.ErrorMessage == nil || !strings.Contains(*resp.ErrorMessage, "no tenant holds more than this one") {
		t.Fatalf("a holder reconnecting into the freed place: %+v, want refused naming kafka_max_connections", resp)
	}
	if s.Refused(int(limitFairShare)) < 2 {
		t.Fatalf("fair-share closures and refusals counted %d, want 2", s.Refused(int(limitFairShare)))
	}
}

// TestSessionsAreToldAtMostReauthMax: a client authenticating through
// SaslAuthenticate v1 (one that re-authenticates, KIP-368) is told a
// session of at most kafka_reauth_max, however long its token lives,
// and its connection is closed then unless it re-authenticated, as
// Kafka's connections.max.reauth.ms; a token expiring sooner keeps its
// own expiry. That bounds how long a renewed credential's fetches pause
// waiting for its group connection's carry-over (groups.renewalPending).
// Before, the session was the token's: an admin-minted credential's,
// days.
func TestSessionsAreToldAtMostReauthMax(t *testing.T) {
	table := leaseTable{}
	_, long, _ := tenantTokens(t, 2, time.Hour, table)
	_, short, _ := tenantTokens(t, 1, time.Second, table)
	cfg := testConfig()
	cfg.ReauthMax = 2 * time.Second
	s := startListener(t, cfg, table, nil)
	lifetime := func(r *testConn, token string) time.Duration {
		t.Helper()
		resp, err := saslExchange(r, token)
		if err != nil || resp.ErrorCode != 0 {
			t.Fatalf("authenticate: %v %+v", err, resp)
		}
		return time.Duration(resp.SessionLifetimeMillis) * time.Millisecond
	}
	idle, reauth, brief := dialAuthenticated(t, s, long[0]), dialAuthenticated(t, s, long[1]), dialAuthenticated(t, s, short[0])
	if got := lifetime(idle, long[0]); got <= 0 || got > cfg.ReauthMax {
		t.Fatalf("an hour's token told a session of %v, want at most kafka_reauth_max %v", got, cfg.ReauthMax)
	}
	if got := lifetime(brief, short[0]); got > time.Second {
		t.Fatalf("a token of a second told a session of %v, want at most its own life", got)
	}
	start := time.Now()
	lifetime(reauth, long[1]) // a session from now
	// Not a wait for an event: sessions are wall-clock time, and the
	// re-authentication below must come a clear second after idle's
	// session began, so that its session outlives idle's by as much.
	time.Sleep(time.Second)
	lifetime(reauth, long[1]) // re-authenticated within its session
	if !idle.closed() {       // waits for the close, 5 s at most
		t.Fatalf("a connection not re-authenticated is open %v after it was told a session of %v, want it closed", time.Since(start), cfg.ReauthMax)
	}
	if _, err := reauth.roundTrip(kmsg.NewPtrApiVersionsRequest()); err != nil {
		t.Fatalf("the re-authenticated connection past the first session's end: %v, want it open", err)
	}
}
