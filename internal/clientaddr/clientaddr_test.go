package clientaddr

import (
	"net/netip"
	"strings"
	"testing"
)

func mustParse(t *testing.T, cidrs ...string) Proxies {
	t.Helper()
	p, err := Parse("trusted_proxies", cidrs)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParse(t *testing.T) {
	p := mustParse(t, "10.0.0.0/8", "fd00::/8", "192.0.2.7", "2001:db8::1", "198.51.100.0/24")
	for addr, trusted := range map[string]bool{
		"10.1.2.3": true, "::ffff:10.1.2.3": true, "11.0.0.1": false, "fd12::1": true, "fe80::1": false,
		"192.0.2.7": true, "192.0.2.8": false, "2001:db8::1": true, "2001:db8::2": false, "198.51.100.255": true,
	} {
		if got := p.Trusts(netip.MustParseAddr(addr)); got != trusted {
			t.Errorf("Trusts(%s) = %t, want %t", addr, got, trusted)
		}
	}
	if p.Len() != 5 {
		t.Fatalf("Len %d, want 5", p.Len())
	}
	if none := mustParse(t); none.Len() != 0 || none.Trusts(netip.MustParseAddr("127.0.0.1")) {
		t.Fatal("an empty list trusts a peer")
	}
	for _, c := range []struct {
		cidrs []string
		want  string
	}{
		{[]string{"10.0.0.0/8", "10.0.0.1/8"}, `trusted_proxies[1]: "10.0.0.1/8" has address bits set past /8: write the network 10.0.0.0/8, or the host 10.0.0.1/32`},
		{[]string{"fd00::1/8"}, `trusted_proxies[0]: "fd00::1/8" has address bits set past /8: write the network fd00::/8, or the host fd00::1/128`},
		{[]string{"0.0.0.0/0"}, `trusted_proxies[0]: "0.0.0.0/0" trusts every peer`},
		{[]string{"::/0"}, `trusted_proxies[0]: "::/0" trusts every peer`},
		{[]string{"::ffff:10.0.0.0/104"}, `trusted_proxies[0]: write an IPv4 network as IPv4`},
		{[]string{"::ffff:10.0.0.1"}, `trusted_proxies[0]: write an IPv4 network as IPv4`},
		{[]string{"10.0.0.0/33"}, `trusted_proxies[0]: must be a CIDR`},
		{[]string{"proxy.internal"}, `trusted_proxies[0]: must be a CIDR (10.0.0.0/8, fd00::/8) or an IP address, got "proxy.internal"`},
		{[]string{""}, `trusted_proxies[0]: must be a CIDR`},
		{[]string{" 10.0.0.0/8"}, `trusted_proxies[0]: must be a CIDR`},
		{[]string{"fe80::1%eth0"}, `trusted_proxies[0]: must be a CIDR`},
		{[]string{"010.0.0.0/8"}, `trusted_proxies[0]: must be a CIDR`},
		{make([]string, ProxiesMax+1), `trusted_proxies: at most 256 networks, got 257`},
	} {
		_, err := Parse("trusted_proxies", c.cidrs)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("Parse(%q): %v, want %s…", c.cidrs, err, c.want)
		}
	}
}

// TestClient is the walk, one request per row: the peer, the
// X-Forwarded-For lines as sent, and the address the request is keyed
// by. Trusted: 10.0.0.0/8 and fd00::/8.
func TestClient(t *testing.T) {
	p := mustParse(t, "10.0.0.0/8", "fd00::/8")
	many := func(n int, hop string) string { return strings.TrimSuffix(strings.Repeat(hop+", ", n), ", ") }
	for _, c := range []struct {
		name      string
		peer      string
		forwarded []string
		want      string
	}{
		{"untrusted peer: the header is never read (the attack)", "203.0.113.9", []string{"198.51.100.1"}, "203.0.113.9"},
		{"untrusted peer naming a trusted hop", "203.0.113.9", []string{"10.0.0.1"}, "203.0.113.9"},
		{"trusted peer, no header: the proxy", "10.0.0.2", nil, "10.0.0.2"},
		{"trusted peer, one client", "10.0.0.2", []string{"198.51.100.1"}, "198.51.100.1"},
		{"a client's own hops left of the one the proxy appended are not read", "10.0.0.2", []string{"1.1.1.1, 2.2.2.2, 198.51.100.1"}, "198.51.100.1"},
		{"a chain of trusted proxies is skipped", "10.0.0.2", []string{"1.1.1.1, 198.51.100.1, 10.0.0.9, fd00::7"}, "198.51.100.1"},
		{"every line, in order, the last line rightmost", "10.0.0.2", []string{"1.1.1.1, 198.51.100.1", "10.0.0.8", "10.0.0.9"}, "198.51.100.1"},
		{"the client in the first line", "10.0.0.2", []string{"198.51.100.1", "10.0.0.9"}, "198.51.100.1"},
		{"every hop trusted: the leftmost", "10.0.0.2", []string{"10.0.0.7, 10.0.0.8"}, "10.0.0.7"},
		{"spaces and tabs around hops", "10.0.0.2", []string{" \t198.51.100.1 ,\t10.0.0.8 "}, "198.51.100.1"},
		{"IPv6 client", "fd00::2", []string{"2001:db8::5"}, "2001:db8::5"},
		{"IPv4-mapped peer and hops as IPv4", "::ffff:10.0.0.2", []string{"::ffff:198.51.100.1, ::ffff:10.0.0.8"}, "198.51.100.1"},
		{"malformed hop: the proxy", "10.0.0.2", []string{"garbage"}, "10.0.0.2"},
		{"malformed hop right of a client stops the walk there", "10.0.0.2", []string{"198.51.100.1, garbage"}, "10.0.0.2"},
		{"malformed hop after trusted ones: the last trusted", "10.0.0.2", []string{"198.51.100.1, junk, 10.0.0.8"}, "10.0.0.8"},
		{"malformed hop left of the client is never reached", "10.0.0.2", []string{"junk, 198.51.100.1"}, "198.51.100.1"},
		{"empty hop", "10.0.0.2", []string{"198.51.100.1,,10.0.0.8"}, "10.0.0.8"},
		{"empty line", "10.0.0.2", []string{"198.51.100.1", ""}, "10.0.0.2"},
		{"a port is not an address", "10.0.0.2", []string{"198.51.100.1:5555"}, "10.0.0.2"},
		{"a bracketed IPv6 is not an address", "10.0.0.2", []string{"[2001:db8::5]"}, "10.0.0.2"},
		{"a zone is not an address", "10.0.0.2", []string{"fe80::1%eth0"}, "10.0.0.2"},
		{"unknown (RFC 7239's obfuscated client)", "10.0.0.2", []string{"unknown"}, "10.0.0.2"},
		{"leading zeros are not IPv4", "10.0.0.2", []string{"010.0.0.1"}, "10.0.0.2"},
		{"a hop longer than any address", "10.0.0.2", []string{strings.Repeat("1", 46)}, "10.0.0.2"},
		{"HopsMax trusted hops then the client: not reached", "10.0.0.2", []string{"198.51.100.1, " + many(HopsMax, "10.0.0.8")}, "10.0.0.8"},
		{"HopsMax-1 trusted hops then the client", "10.0.0.2", []string{"198.51.100.1, " + many(HopsMax-1, "10.0.0.8")}, "198.51.100.1"},
		{"HopsMax counted across lines", "10.0.0.2", append([]string{"198.51.100.1"}, strings.Split(many(HopsMax, "10.0.0.8"), ", ")...), "10.0.0.8"},
		{"hops within HeaderBytesMax are read", "10.0.0.2", []string{"198.51.100.1," + strings.Repeat(" ", HeaderBytesMax-len("198.51.100.1,10.0.0.8")) + "10.0.0.8"}, "198.51.100.1"},
		{"a hop one byte past HeaderBytesMax is not", "10.0.0.2", []string{"198.51.100.1," + strings.Repeat(" ", HeaderBytesMax-len("198.51.100.1,10.0.0.8")+1) + "10.0.0.8"}, "10.0.0.8"},
		{"a hop cut by HeaderBytesMax is not read", "10.0.0.2", []string{"198.51.100.1" + strings.Repeat(" ", HeaderBytesMax)}, "10.0.0.2"},
		{"no TCP peer", "", []string{"198.51.100.1"}, "invalid IP"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var peer netip.Addr
			if c.peer != "" {
				peer = netip.MustParseAddr(c.peer)
			}
			var forwarded [][]byte
			for _, l := range c.forwarded {
				forwarded = append(forwarded, []byte(l))
			}
			if got := p.Client(peer, forwarded); got.String() != c.want {
				t.Fatalf("Client(%s, %q) = %s, want %s", c.peer, c.forwarded, got, c.want)
			}
		})
	}
	if got := (Proxies{}).Client(netip.MustParseAddr("10.0.0.2"), [][]byte{[]byte("198.51.100.1")}); got.String() != "10.0.0.2" {
		t.Fatalf("no trusted proxies: %s, want the peer", got)
	}
}
