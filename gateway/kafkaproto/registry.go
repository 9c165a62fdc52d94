package kafkaproto

// Behavior: the listener's connection registry — who gets a slot.
//
//   - kafka_max_connections_per_address: a connection from an address
//     (internal/connguard's key: the IP, IPv6 per /64) holding that many
//     open is closed at accept, as the HTTP listeners' connguard does
//     (nothing is answered: a Kafka client has sent no request yet).
//   - kafka_max_connections: at the bound a new connection takes the
//     place of a connection that has not authenticated — the oldest of
//     the address holding the most such connections — and is refused
//     only when every open one has authenticated. Holding every slot with
//     connections that send nothing (no token needed) would otherwise
//     lock every client out for auth_timeout, over and over; and taking
//     the oldest of all let one address churning connections evict every
//     other client still between connect and SaslAuthenticate (three
//     round trips and TLS: redteam7 #3). The churning address holds the
//     most, so its own connections give way; a client handshaking from
//     an address with fewer in that state is the last to.
//
// Every count here is under Server.mu.

import (
	"fmt"
	"net"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/capgate/capgate/internal/connguard"
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
	if len(s.conns) >= s.cfg.MaxConnections {
		old := s.evictableLocked()
		if old == nil {
			s.refusedConns[limitTotal].Add(1)
			s.refused.Refused("kafka connection", "kafka_max_connections reached, all authenticated",
				zap.String("remote", nc.RemoteAddr().String()), zap.Int("max", s.cfg.MaxConnections))
			return nil, false
		}
		s.dropLocked(old) // its goroutine unregisters it again, harmlessly
		old.nc.Close()
		s.evicted.Add(1)
		s.refused.Refused("unauthenticated kafka connection", "kafka_max_connections reached: closed for a new connection",
			zap.String("remote", old.nc.RemoteAddr().String()), zap.Duration("open_for", time.Since(old.opened)))
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

// dropLocked uncounts c everywhere, once.
func (s *Server) dropLocked(c *conn) {
	if _, ok := s.conns[c]; !ok {
		return
	}
	delete(s.conns, c)
	s.releaseIdentityLocked(c)
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
// MaxConnectionsPerPrincipal: the identity re-authentication keeps (kind,
// issuer, subject).
func identityKey(p *Principal) string {
	return string(p.Claims.Kind()) + "\x00" + p.Claims.Issuer + "\x00" + p.Claims.Subject
}

// claimIdentity counts c's first authentication against its identity's
// connections, or refuses it at MaxConnectionsPerPrincipal. Once it
// succeeded, c is no longer evictable for a new connection.
func (s *Server) claimIdentity(c *conn, p *Principal) error {
	key := identityKey(p)
	s.mu.Lock()
	defer s.mu.Unlock()
	max := s.cfg.MaxConnectionsPerPrincipal
	if max <= 0 || c.identity == key {
		s.authenticatedLocked(c)
		return nil
	}
	if s.byIdentity[key] >= max {
		return fmt.Errorf("too many connections: this identity has %d open, kafka_max_connections_per_principal %d", s.byIdentity[key], max)
	}
	s.authenticatedLocked(c)
	s.releaseIdentityLocked(c)
	if s.byIdentity == nil {
		s.byIdentity = map[string]int{}
	}
	s.byIdentity[key]++
	c.identity = key
	return nil
}

// releaseIdentityLocked uncounts c's identity, once. s.mu held.
func (s *Server) releaseIdentityLocked(c *conn) {
	if c.identity == "" {
		return
	}
	if s.byIdentity[c.identity]--; s.byIdentity[c.identity] <= 0 {
		delete(s.byIdentity, c.identity)
	}
	c.identity = ""
}

// limit is a bound a connection was refused or closed at, for the
// metrics (Server.Refused).
type limit int

const (
	limitTotal limit = iota
	limitPerAddress
	limitCount
)

// Limits are the label values of Server.Refused, in order; LimitsHelp
// says what each counts.
var Limits = [limitCount]string{"total", "per_address"}

const LimitsHelp = "total (at accept: kafka_max_connections open, all authenticated), " +
	"per_address (at accept: kafka_max_connections_per_address from its address)."

// Refused is how many connections were refused or closed at the bound
// named Limits[i] since the listener started.
func (s *Server) Refused(i int) uint64 { return s.refusedConns[i].Load() }

// Evicted is how many unauthenticated connections were closed for a new
// one at kafka_max_connections.
func (s *Server) Evicted() uint64 { return s.evicted.Load() }
