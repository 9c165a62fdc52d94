package kafkaproto

// Behavior: the listener's connection registry — who gets a slot.
//
//   - kafka_max_connections_per_address: a connection from an address
//     (internal/connguard's key: the IP, IPv6 per /64) holding that many
//     open is closed at accept, as the HTTP listeners' connguard does
//     (nothing is answered: a Kafka client has sent no request yet).
//   - kafka_max_connections_per_principal and _per_tenant: at SASL
//     (claimIdentity), a connection beyond its identity's or its
//     tenant's bound is refused (SASL_AUTHENTICATION_FAILED naming the
//     setting, closed). The tenant (tenantKey) is the unit the
//     coordinator bounds a credential's members by: one credential's
//     members are many subjects, so per identity alone one tenant filled
//     the listener (redteam7 #2).
//   - A connection is closed when its session ends (its token's expiry)
//     without a re-authentication (armExpiryLocked): its slot does not
//     outlive the credential.
//   - kafka_max_connections: at the bound a new connection takes the
//     place of a connection that has not authenticated — the oldest of
//     the address holding the most such connections — and, when every
//     open one has authenticated, goes to the handshake reserve (below);
//     past that too it is refused. Holding every slot with
//     connections that send nothing (no token needed) would otherwise
//     lock every client out for auth_timeout, over and over; and taking
//     the oldest of all let one address churning connections evict every
//     other client still between connect and SaslAuthenticate (three
//     round trips and TLS: redteam7 #3). The churning address holds the
//     most, so its own connections give way; a client handshaking from
//     an address with fewer in that state is the last to.
//   - Fair share: when every open connection has authenticated, a new
//     one is still admitted into a handshake reserve (handshakeReserve,
//     a 64th of kafka_max_connections), and at its first SASL
//     (fairShareLocked) takes the place of the newest connection of the
//     tenant holding the most, if that one holds more than one more than
//     its own tenant, or is refused: a few tenants at
//     kafka_max_connections_per_tenant (4 × 256 = 1,024 at the defaults)
//     locked every other tenant out at accept (redteam12 #4).
//
// Every count here is under Server.mu.

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/capgate/capgate/internal/connguard"
	"github.com/capgate/capgate/ocap"
)

// addrConns is one client address's connections (Server.byAddr).
type addrConns struct {
	open int
	// unauthed are those not yet authenticated, oldest first.
	unauthed []*conn
}

// register admits a connection unless closing or over a bound (the
// package's Behavior).
func (s *Server) register(nc net.Conn) (*conn, bool) {
	addr, counted := connguard.AddressKey(nc.RemoteAddr())
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, false
	}
	if max := s.cfg.MaxConnectionsPerAddress; counted && max > 0 && s.byAddr[addr] != nil && s.byAddr[addr].open >= max {
		s.refusedConns[limitPerAddress].Add(1)
		s.refused.Refused("kafka connection", "kafka_max_connections_per_address reached",
			zap.String("remote", nc.RemoteAddr().String()), zap.Int("max", max))
		return nil, false
	}
	if len(s.conns) >= s.cfg.MaxConnections && !s.roomLocked(nc) {
		return nil, false
	}
	c := newConn(s, nc)
	c.addr, c.addrCounted = addr, counted
	s.conns[c] = struct{}{}
	if counted {
		a := s.byAddr[addr]
		if a == nil {
			a = &addrConns{}
			s.byAddr[addr] = a
		}
		a.open++
		a.unauthed = append(a.unauthed, c)
	}
	s.wg.Add(1)
	return c, true
}

// roomLocked makes room for nc at kafka_max_connections: it closes the
// connection a new one takes the place of (evictableLocked), or, when
// every open one has authenticated, admits nc into the handshake
// reserve, where its SASL decides whether it stays (fairShareLocked); it
// reports false when nc is refused.
func (s *Server) roomLocked(nc net.Conn) bool {
	old := s.evictableLocked()
	if old == nil && len(s.conns) < s.cfg.MaxConnections+handshakeReserve(s.cfg.MaxConnections) {
		return true
	}
	if old == nil {
		s.refusedConns[limitTotal].Add(1)
		s.refused.Refused("kafka connection", "kafka_max_connections reached, all authenticated, the handshake reserve full",
			zap.String("remote", nc.RemoteAddr().String()), zap.Int("max", s.cfg.MaxConnections))
		return false
	}
	s.closeForLocked(old, "unauthenticated kafka connection", "kafka_max_connections reached: closed for a new connection")
	s.evicted.Add(1)
	return true
}

// handshakeReserve is how many connections past kafka_max_connections
// may be open while every slot has authenticated: a newcomer's place to
// authenticate in, so that the tenants holding the listener cannot lock
// every other tenant out at accept (fairShareLocked; redteam12 #4). A
// 64th of kafka_max_connections, at least one: 16 at the default 1,024.
func handshakeReserve(maxConns int) int { return max(1, maxConns/64) }

// evictableLocked is the connection a new one takes the place of at
// kafka_max_connections: the oldest unauthenticated connection of the
// address holding the most of them (of two holding as many, the one
// whose oldest is older), else an unauthenticated one without an
// address; nil when every open connection has authenticated.
func (s *Server) evictableLocked() *conn {
	var most *addrConns
	for _, a := range s.byAddr {
		if len(a.unauthed) == 0 {
			continue
		}
		if most == nil || len(a.unauthed) > len(most.unauthed) ||
			len(a.unauthed) == len(most.unauthed) && a.unauthed[0].opened.Before(most.unauthed[0].opened) {
			most = a
		}
	}
	if most != nil {
		return most.unauthed[0]
	}
	for c := range s.conns { // not TCP: no address to count by
		if !c.addrCounted && !c.authed.Load() {
			return c
		}
	}
	return nil
}

// authenticatedLocked takes c out of its address's unauthenticated
// connections, once: it is never evicted for a new one now.
func (s *Server) authenticatedLocked(c *conn) {
	if a := s.byAddr[c.addr]; c.addrCounted && a != nil {
		if i := slices.Index(a.unauthed, c); i >= 0 {
			a.unauthed = slices.Delete(a.unauthed, i, i+1)
		}
	}
}

// dropLocked uncounts c everywhere, once: for an eviction or an expiry
// at once (the slot is free before c's goroutine has seen the close),
// and again, harmlessly, when that goroutine unregisters it.
func (s *Server) dropLocked(c *conn) {
	s.releaseIdentityLocked(c)
	if c.expiry != nil {
		c.expiry.Stop()
	}
	if _, ok := s.conns[c]; !ok {
		return
	}
	delete(s.conns, c)
	if !c.addrCounted {
		return
	}
	s.authenticatedLocked(c)
	if a := s.byAddr[c.addr]; a != nil {
		if a.open--; a.open <= 0 {
			delete(s.byAddr, c.addr)
		}
	}
}

func (s *Server) unregister(c *conn) {
	s.mu.Lock()
	s.dropLocked(c)
	s.mu.Unlock()
	s.wg.Done()
}

// identityKey is whom a connection counts against for
// MaxConnectionsPerPrincipal: kind, issuer and holder (Principal.tenant —
// never a credential's name, which another holder's may share: redteam7
// #1).
func identityKey(p *Principal) string {
	return string(p.Claims.Kind()) + "\x00" + p.Claims.Issuer + "\x00" + p.tenant()
}

// tenantKey is whom a connection counts against for
// MaxConnectionsPerTenant: the tenant the coordinator counts a join's
// members for (coordinator/join.go tenant) — a client credential's OAuth
// client ("oauth:" subject), else its jti; an IdP identity's id — and a
// capability's tnt, which the coordinator sets to that same tenant on
// every capability a join or heartbeat grants (attenuated children keep
// it). So a credential's group connections and the capabilities of every
// member it joined (each a subject of its own) count together. A
// capability without tnt (an admin grant) counts for its holder, as the
// in-flight caps count it (gateway/inflight.go tenantOf).
func tenantKey(c *ocap.Claims) string {
	switch {
	case c.Kind() == ocap.KindCapability && c.Tenant == "":
		return "holder\x00" + c.Issuer + "\x00" + c.Subject
	case c.Kind() == ocap.KindCapability:
		return "tenant\x00" + c.Tenant
	case c.Kind() == ocap.KindClient && strings.HasPrefix(c.Subject, oauthSubject):
		return "tenant\x00" + c.Subject
	}
	return "tenant\x00" + c.ID
}

// oauthSubject prefixes the subject of the credentials the coordinator's
// /oauth/token mints (coordinator/oauth_clients.go).
const oauthSubject = "oauth:"

// claimIdentity counts an authentication of c (its first, or a KIP-368
// re-authentication) against its identity's and its tenant's
// connections, or refuses it at MaxConnectionsPerPrincipal or
// MaxConnectionsPerTenant; a re-authentication as the same identity and
// tenant counts nothing again. Once it succeeded, c is no longer
// evictable for a new connection, and it is closed when p expires unless
// re-authenticated before (armExpiryLocked).
func (s *Server) claimIdentity(c *conn, p *Principal) error {
	identity, tenant := identityKey(p), tenantKey(p.Claims)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, open := s.conns[c]; !open { // evicted or expired meanwhile: nothing may count it now
		return errors.New("connection closed")
	}
	if max := s.cfg.MaxConnectionsPerPrincipal; max > 0 && identity != c.identity && s.byIdentity[identity] >= max {
		s.refusedConns[limitPerPrincipal].Add(1)
		return fmt.Errorf("too many connections: this identity has %d open, kafka_max_connections_per_principal %d", s.byIdentity[identity], max)
	}
	if max := s.cfg.MaxConnectionsPerTenant; max > 0 && tenant != c.tenant && s.byTenant[tenant] >= max {
		s.refusedConns[limitPerTenant].Add(1)
		return fmt.Errorf("too many connections: this tenant (a credential with the capabilities granted under it) has %d open, kafka_max_connections_per_tenant %d",
			s.byTenant[tenant], max)
	}
	if c.identity == "" && s.authenticatedCountLocked() >= s.cfg.MaxConnections {
		if err := s.fairShareLocked(tenant); err != nil {
			return err
		}
	}
	s.releaseIdentityLocked(c)
	s.byIdentity[identity]++
	s.byTenant[tenant]++
	c.identity, c.tenant = identity, tenant
	c.requestTenant = tenant // claimIdentity runs on c's goroutine, the only reader
	s.authenticatedLocked(c)
	s.armExpiryLocked(c, p.Expires)
	return nil
}

// fairShareLocked finds a slot for a connection first authenticating
// for tenant while every kafka_max_connections slot is authenticated (it
// came in through the handshake reserve): the newest connection of the
// tenant holding the most — when it holds more than one more than
// tenant — is closed for it; else it is refused. Without it a few
// tenants at kafka_max_connections_per_tenant (4 at the defaults: 4 ×
// 256 = 1,024) held every slot and every other tenant's connection was
// closed at accept for as long as they kept theirs (redteam12 #4); now
// each new tenant gets a slot as long as a tenant holds more than it
// does.
func (s *Server) fairShareLocked(tenant string) error {
	most := ""
	for t, n := range s.byTenant {
		if n > s.byTenant[most] || n == s.byTenant[most] && t < most {
			most = t
		}
	}
	if s.byTenant[most] <= s.byTenant[tenant]+1 {
		s.refusedConns[limitFairShare].Add(1)
		return fmt.Errorf("too many connections: kafka_max_connections (%d) are open and authenticated, and no tenant holds more than this one (%d)",
			s.cfg.MaxConnections, s.byTenant[tenant])
	}
	var newest *conn
	for o := range s.conns {
		if o.tenant == most && (newest == nil || o.opened.After(newest.opened)) {
			newest = o
		}
	}
	s.closeForLocked(newest, "kafka connection", "kafka_max_connections reached: its tenant holds the most, closed for another tenant's")
	s.refusedConns[limitFairShare].Add(1)
	return nil
}

// authenticatedCountLocked is how many open connections have
// authenticated (each counts for one tenant).
func (s *Server) authenticatedCountLocked() int {
	n := 0
	for _, k := range s.byTenant {
		n += k
	}
	return n
}

// closeForLocked closes o for another connection, logging what and why.
func (s *Server) closeForLocked(o *conn, what, why string) {
	s.dropLocked(o) // its goroutine unregisters it again, harmlessly
	o.nc.Close()
	o.cancel() // a request in flight, or a frame waiting for room, ends now
	s.refused.Refused(what, why, zap.String("remote", o.nc.RemoteAddr().String()), zap.Duration("open_for", time.Since(o.opened)))
}

// releaseIdentityLocked uncounts c's identity and tenant, once.
func (s *Server) releaseIdentityLocked(c *conn) {
	if c.identity == "" {
		return
	}
	if s.byIdentity[c.identity]--; s.byIdentity[c.identity] <= 0 {
		delete(s.byIdentity, c.identity)
	}
	if s.byTenant[c.tenant]--; s.byTenant[c.tenant] <= 0 {
		delete(s.byTenant, c.tenant)
	}
	c.identity, c.tenant = "", ""
}

// armExpiryLocked closes c when its session ends (end: its token's
// expiry) unless a re-authentication moved the end later first: KIP-368
// says a session ends there, and before, a connection whose session
// ended was closed only when its next request came — one that sent none
// kept its slot for kafka_idle_timeout (10 min), so a tenant whose
// tokens had expired still held the listener (redteam7 #2).
func (s *Server) armExpiryLocked(c *conn, end time.Time) {
	c.sessionEnd = end
	if c.expiry != nil {
		c.expiry.Stop()
	}
	c.expiry = time.AfterFunc(time.Until(end), func() { s.expire(c) })
}

// expire closes c if its session has ended and it is still open.
func (s *Server) expire(c *conn) {
	s.mu.Lock()
	_, open := s.conns[c]
	due := open && !time.Now().Before(c.sessionEnd)
	if due {
		s.dropLocked(c) // its goroutine unregisters it again, harmlessly
	}
	s.mu.Unlock()
	if !due {
		return
	}
	s.expired.Add(1)
	c.nc.Close()
	c.cancel() // a request in flight, or a frame waiting for room, ends now
	s.log.Debug("kafka session expired and was not re-authenticated: connection closed (KIP-368)", zap.String("remote", c.nc.RemoteAddr().String()))
}

// limit is a bound a connection was refused or closed at, for the
// metrics (Server.Refused).
type limit int

const (
	limitTotal limit = iota
	limitPerAddress
	limitPerPrincipal
	limitPerTenant
	limitRequestBytes          // closed: no room in kafka_max_request_bytes_held (requestbudget.go)
	limitRequestBytesPerTenant // closed: none in its tenant's _per_tenant
	limitFairShare             // at SASL with every slot authenticated (fairShareLocked)
	limitCount
)

// Limits are the label values of Server.Refused, in order; LimitsHelp
// says what each counts.
var Limits = [limitCount]string{"total", "per_address", "per_principal", "per_tenant", "request_bytes_held", "request_bytes_held_per_tenant", "fair_share"}

const LimitsHelp = "total (at accept: kafka_max_connections open, all authenticated, and the handshake reserve full), " +
	"per_address (at accept: kafka_max_connections_per_address from its address), " +
	"per_principal, per_tenant (at SASL: kafka_max_connections_per_principal, _per_tenant), " +
	"request_bytes_held, request_bytes_held_per_tenant (a frame found no room in kafka_max_request_bytes_held, _per_tenant within its read timeout), " +
	"fair_share (at SASL with every kafka_max_connections slot authenticated: a connection of the tenant holding the most closed for another tenant's, or the new one refused when no tenant holds more than its own)."

// Refused is how many connections were refused or closed at the bound
// named Limits[i] since the listener started.
func (s *Server) Refused(i int) uint64 { return s.refusedConns[i].Load() }

// Expired is how many connections were closed when their session ended
// without a re-authentication (armExpiryLocked).
func (s *Server) Expired() uint64 { return s.expired.Load() }

// Evicted is how many unauthenticated connections were closed for a new
// one at kafka_max_connections.
func (s *Server) Evicted() uint64 { return s.evicted.Load() }
