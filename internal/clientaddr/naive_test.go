package clientaddr

import (
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
)

// naiveClient is the rule as the package comment states it, written the
// plain way (join the lines, split on commas, walk from the right), for
// headers within HeaderBytesMax.
func naiveClient(p Proxies, peer netip.Addr, lines []string) netip.Addr {
	client := peer.Unmap()
	if !p.Trusts(client) || len(lines) == 0 {
		return client
	}
	hops := strings.Split(strings.Join(lines, ","), ",")
	for i := len(hops) - 1; i >= 0 && len(hops)-i <= HopsMax; i-- {
		a, err := netip.ParseAddr(strings.Trim(hops[i], " \t"))
		if err != nil || a.Zone() != "" {
			return client
		}
		if !p.Trusts(a) {
			return a.Unmap()
		}
		client = a.Unmap()
	}
	return client
}

var hopPool = []string{"10.0.0.1", "10.9.9.9", "fd00::1", "::ffff:10.0.0.3", "198.51.100.1", "2001:db8::1", "::ffff:198.51.100.2",
	"", " ", "junk", "1.2.3.4:80", "fe80::1%lo", "[::1]", " 10.0.0.4\t", "203.0.113.5 ", "unknown"}

// FuzzClient checks Client against naiveClient; the seeded loop in
// TestClientAgainstNaive runs 20000 random headers every time.
func FuzzClient(f *testing.F) {
	f.Add("10.0.0.2", "198.51.100.1, 10.0.0.1")
	f.Add("10.0.0.2", "junk, 198.51.100.1")
	f.Add("203.0.113.1", "10.0.0.1")
	p := mustParseF(f)
	f.Fuzz(func(t *testing.T, peer, header string) {
		a, err := netip.ParseAddr(peer)
		if err != nil || len(header) > HeaderBytesMax/2 {
			return
		}
		lines := strings.Split(header, "\n")
		checkAgainstNaive(t, p, a, lines)
	})
}

func TestClientAgainstNaive(t *testing.T) {
	p := mustParse(t, "10.0.0.0/8", "fd00::/8")
	rng := rand.New(rand.NewPCG(1, 2))
	peers := []string{"10.0.0.2", "203.0.113.1", "fd00::2", "::ffff:10.0.0.2"}
	for range 20000 {
		lines := make([]string, rng.IntN(4))
		for i := range lines {
			hops := make([]string, 1+rng.IntN(HopsMax/2))
			for j := range hops {
				hops[j] = hopPool[rng.IntN(len(hopPool))]
			}
			lines[i] = strings.Join(hops, ",")
		}
		checkAgainstNaive(t, p, netip.MustParseAddr(peers[rng.IntN(len(peers))]), lines)
	}
}

func checkAgainstNaive(t *testing.T, p Proxies, peer netip.Addr, lines []string) {
	t.Helper()
	forwarded := make([][]byte, len(lines))
	for i, l := range lines {
		forwarded[i] = []byte(l)
	}
	got, want := p.Client(peer, forwarded), naiveClient(p, peer, lines)
	if got != want {
		t.Fatalf("Client(%s, %q) = %s, the naive walk says %s", peer, lines, got, want)
	}
	if !p.Trusts(peer) && got != peer.Unmap() {
		t.Fatalf("an untrusted peer %s was keyed as %s", peer, got)
	}
}

func mustParseF(f *testing.F) Proxies {
	p, err := Parse("trusted_proxies", []string{"10.0.0.0/8", "fd00::/8"})
	if err != nil {
		f.Fatal(err)
	}
	return p
}
