package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"strings"
)

// Allows reports whether cs carries a client certificate that verified
// against the listener's client CA and whose names match ch.ClientNames.
// A nil cs (plaintext) allows nothing.
func (ch Channel) Allows(cs *tls.ConnectionState) bool {
	if cs == nil || len(cs.VerifiedChains) == 0 || len(cs.PeerCertificates) == 0 {
		return false
	}
	if len(ch.ClientNames) == 0 {
		return true
	}
	return namesMatch(cs.PeerCertificates[0], ch.ClientNames)
}

// PeerName is the verified client certificate's common name (or first
// DNS name), "" without one: for logs and audit, never for decisions.
func PeerName(cs *tls.ConnectionState) string {
	if cs == nil || len(cs.VerifiedChains) == 0 || len(cs.PeerCertificates) == 0 {
		return ""
	}
	leaf := cs.PeerCertificates[0]
	if leaf.Subject.CommonName != "" {
		return leaf.Subject.CommonName
	}
	if len(leaf.DNSNames) > 0 {
		return leaf.DNSNames[0]
	}
	return ""
}

func namesMatch(leaf *x509.Certificate, patterns []string) bool {
	names := append([]string{leaf.Subject.CommonName}, leaf.DNSNames...)
	for _, u := range leaf.URIs {
		names = append(names, u.String())
	}
	for _, n := range names {
		if n == "" {
			continue
		}
		for _, p := range patterns {
			if matchName(p, n) {
				return true
			}
		}
	}
	return false
}

// matchName: p exact, or p's text before a trailing "*" a prefix of n.
func matchName(p, n string) bool {
	if prefix, ok := strings.CutSuffix(p, "*"); ok {
		return strings.HasPrefix(n, prefix)
	}
	return p == n
}
