// Package clientaddr says which address a request comes from when
// trusted proxies (a load balancer, an ingress) stand between the client
// and the server: the setting trusted_proxies names their networks, and
// a connection from one of them may name its client in X-Forwarded-For.
//
// The rule is nginx's real_ip_recursive (and Envoy's
// xff_num_trusted_hops, counted by network): a peer outside the trusted
// networks is the client, whatever it sends — X-Forwarded-For from it is
// never read, so a client sending the header directly gains nothing.
// From a trusted peer, the header's hops (every X-Forwarded-For line of
// the header section, in order, each a comma-separated list) are walked
// from the right, the hop each proxy appended first: a hop inside the
// trusted networks is one more proxy and the walk goes on; the first hop
// outside them is the client. A hop that is not a bare IP address (a
// name, "unknown", a port, a zone, nothing between two commas) stops the
// walk: the address is the last trusted one seen — never a value that
// could not be read. So is a walk that ran out of hops (everything
// trusted) or past its bounds (HopsMax hops, HeaderBytesMax bytes read
// from the right).
//
// Only what the trusted proxies themselves appended can be believed:
// everything left of the first untrusted hop was written by the client.
// A list naming a network anyone can send from (a /0) would make the
// header the client's word, so Parse refuses it.
//
// Client and Parse are pure (no IO, no clock); Request reads a fasthttp
// request with them. Proxies is immutable: safe for concurrent use.
package clientaddr

import (
	"bytes"
	"fmt"
	"net/netip"
)

// Bounds of the setting and of one walk.
const (
	// ProxiesMax bounds the networks of one trusted_proxies list (a
	// hop's check is a scan of them).
	ProxiesMax = 256
	// HopsMax bounds the X-Forwarded-For hops read from the right: a
	// chain of more trusted proxies than this ends at the last one read.
	HopsMax = 32
	// HeaderBytesMax bounds the X-Forwarded-For bytes read from the
	// right (spaces included): a hop not wholly within them is not read.
	HeaderBytesMax = 4096
	// hopBytesMax is the longest IP address text without a zone
	// (ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255).
	hopBytesMax = 45
)

// Header is the request header the trusted proxies append to.
const Header = "X-Forwarded-For"

// Proxies are the trusted networks; the zero value trusts none (every
// request's client is its peer).
type Proxies struct {
	nets []netip.Prefix
}

// Parse reads a trusted_proxies list; key names the setting in errors
// ("gateway.trusted_proxies"). Each entry is a CIDR (10.0.0.0/8,
// fd00::/8) or a bare address (one host). Refused: more than ProxiesMax
// entries; anything else; a CIDR with bits set past its length
// (10.0.0.1/8 — a typo for a host, or a network written wrong); an
// IPv4-mapped IPv6 network (peers are compared as IPv4); a /0, which
// trusts every peer.
func Parse(key string, cidrs []string) (Proxies, error) {
	if len(cidrs) > ProxiesMax {
		return Proxies{}, fmt.Errorf("%s: at most %d networks, got %d", key, ProxiesMax, len(cidrs))
	}
	var p Proxies
	for i, s := range cidrs {
		n, err := parseNet(s)
		if err != nil {
			return Proxies{}, fmt.Errorf("%s[%d]: %w", key, i, err)
		}
		p.nets = append(p.nets, n)
	}
	return p, nil
}

func parseNet(s string) (netip.Prefix, error) {
	n, err := netip.ParsePrefix(s)
	if err != nil {
		a, aerr := netip.ParseAddr(s)
		if aerr != nil || a.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("must be a CIDR (10.0.0.0/8, fd00::/8) or an IP address, got %q", s)
		}
		n = netip.PrefixFrom(a, a.BitLen())
	}
	switch {
	case n.Addr().Is4In6():
		return netip.Prefix{}, fmt.Errorf("write an IPv4 network as IPv4 (peers are compared as IPv4), got %q", s)
	case n.Bits() == 0:
		return netip.Prefix{}, fmt.Errorf("%q trusts every peer: anyone could name any client in %s; list the proxies' own networks", s, Header)
	case n != n.Masked():
		return netip.Prefix{}, fmt.Errorf("%q has address bits set past /%d: write the network %s, or the host %s/%d", s, n.Bits(), n.Masked(), n.Addr(), n.Addr().BitLen())
	}
	return n, nil
}

// Len is how many networks are trusted (0: X-Forwarded-For is never read).
func (p Proxies) Len() int { return len(p.nets) }

// Trusts reports whether a (IPv4-mapped IPv6 as IPv4) is in a trusted
// network.
func (p Proxies) Trusts(a netip.Addr) bool {
	a = a.Unmap()
	for _, n := range p.nets {
		if n.Contains(a) {
			return true
		}
	}
	return false
}

// Client is the address a request comes from: peer (the connection's),
// unless peer is trusted and forwarded — the request's X-Forwarded-For
// lines in order — names another, as the package comment says. IPv4-
// mapped addresses come back as IPv4; an invalid peer (no TCP address)
// comes back as it is.
func (p Proxies) Client(peer netip.Addr, forwarded [][]byte) netip.Addr {
	client := peer.Unmap()
	if !p.Trusts(client) {
		return client
	}
	hops, budget := 0, HeaderBytesMax
	for i := len(forwarded) - 1; i >= 0; i-- {
		line := forwarded[i]
		for {
			hops++
			if hops > HopsMax || budget <= 0 {
				return client
			}
			start := max(0, len(line)-budget)
			comma := bytes.LastIndexByte(line[start:], ',')
			switch {
			case comma >= 0:
				comma += start
			case start > 0:
				return client // the hop begins before the bytes that may be read
			}
			hop := line[comma+1:]
			budget -= len(hop) + 1
			a, ok := parseHop(hop)
			if !ok {
				return client
			}
			if !p.Trusts(a) {
				return a
			}
			client = a
			if comma < 0 {
				break
			}
			line = line[:comma]
		}
	}
	return client
}

// parseHop reads one hop: an IP address, spaces and tabs around it
// allowed, no zone, IPv4-mapped as IPv4.
func parseHop(hop []byte) (netip.Addr, bool) {
	hop = bytes.Trim(hop, " \t")
	if len(hop) == 0 || len(hop) > hopBytesMax {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(string(hop))
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}
