package main

// What to do when an admin request got no HTTP answer. Go's transport
// errors say what failed (EOF, connection refused, x509: certificate
// signed by unknown authority) but not which flag fixes it; a new user
// met each of them bare (newuser #4). connectHint adds the fix.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/capgate/capgate/client"
)

// tlsProbeTimeout bounds the handshake connectHint tries when a plain
// http:// request was cut off.
const tlsProbeTimeout = 3 * time.Second

// endpoint is what a URL was meant to reach, for the hints: its name,
// the flag and variable that set it, and capgate dev's address of it.
type endpoint struct{ name, flags, dev string }

var (
	coordinatorEndpoint = endpoint{"the coordinator", "--coordinator or CAPGATE_COORDINATOR_URL", "http://127.0.0.1:7070"}
	// A gateway's HTTP address: consume --gateways naming a Kafka port
	// retried "connection reset by peer" bare (newuser6).
	gatewayEndpoint = endpoint{"a gateway", "--gateways or CAPGATE_GATEWAY_URLS", "http://127.0.0.1:8080"}
)

// connectHint is err, from a request to rawURL (meant for the
// coordinator) that got no HTTP answer within wait, with what to do about
// it; err unchanged when there is nothing to add.
func connectHint(ctx context.Context, rawURL string, wait time.Duration, err error) error {
	return endpointHint(ctx, coordinatorEndpoint, rawURL, wait, err)
}

// endpointHint is connectHint for a URL meant for to.
func endpointHint(ctx context.Context, to endpoint, rawURL string, wait time.Duration, err error) error {
	hint := endpointHintText(ctx, to, rawURL, wait, err)
	if hint == "" {
		return err
	}
	return fmt.Errorf("%w (%s)", err, hint)
}

// endpointHintText is endpointHint's hint alone, "" when there is none.
func endpointHintText(ctx context.Context, to endpoint, rawURL string, wait time.Duration, err error) string {
	u, perr := url.Parse(rawURL)
	if perr != nil || ctx.Err() != nil {
		return ""
	}
	hint := transportHint(to, u, wait, err)
	if hint == "" && u.Scheme == "http" && cutOff(err) {
		if speaksTLS(ctx, hostPort(u)) {
			hint = fmt.Sprintf("the server speaks TLS: use https://%s (and --cacert or $CAPGATE_CACERT if its CA is your own)", u.Host)
		} else {
			// A Kafka port — the broker's, the gateway's Kafka listener
			// (capgate dev: 9092, 9093) — closes on an HTTP request:
			// "connection reset by peer" and no more (newuser5).
			hint = fmt.Sprintf("%s closed the connection without an HTTP answer: is it a Kafka port (a broker, a gateway's Kafka listener) rather than %s HTTP address? Point %s at %s (capgate dev: %s)", u.Host, possessive(to.name), to.flags, to.name, to.dev)
		}
	}
	return hint
}

// gatewayHint is err, a fetch no gateway answered, with what to do about
// it (endpointHint, for the gateway its url.Error names).
func gatewayHint(ctx context.Context, err error) error {
	var u *url.Error
	if !errors.As(err, &u) {
		return err
	}
	return endpointHint(ctx, gatewayEndpoint, u.URL, client.DefaultConfig().RequestTimeout, err)
}

// transportHint is the fix for the errors that name their cause.
func transportHint(to endpoint, u *url.URL, wait time.Duration, err error) string {
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var verify *tls.CertificateVerificationError
	var dns *net.DNSError
	switch {
	case errors.As(err, &unknownCA):
		return "the server's certificate is signed by a CA this command does not trust: pass --cacert FILE or set CAPGATE_CACERT (capgate dev --tls writes capgate-data/tls/ca.crt)"
	case errors.As(err, &hostname):
		return fmt.Sprintf("the server's certificate is not for %s: use a host name it names, or check %s", u.Hostname(), to.flags)
	case errors.As(err, &verify):
		return "the server's certificate did not verify: check --cacert / CAPGATE_CACERT"
	case u.Scheme == "https" && (errors.As(err, new(tls.RecordHeaderError)) || errors.Is(err, http.ErrSchemeMismatch)):
		return fmt.Sprintf("the server speaks plain HTTP: use http://%s", u.Host)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Sprintf("nothing listens at %s: is %s running (capgate dev, or capgate %s)? Point %s at it", u.Host, to.name, strings.TrimPrefix(strings.TrimPrefix(to.name, "the "), "a "), to.flags)
	case errors.As(err, &dns):
		return fmt.Sprintf("host %q not found: check %s", u.Hostname(), to.flags)
	case isTimeout(err):
		// capgate dev's embedded Kafka (9092) takes an HTTP request
		// and never answers: a minute, then this bare (newuser5); the
		// SDK's join said "request_timeout passed" bare (newuser6).
		return fmt.Sprintf("no answer from %s within %s, where %s answers at once: is it %s HTTP address, not a Kafka port (capgate dev: Kafka 9092, the Kafka listener 9093, %s %s)? Check %s", u.Host, wait, to.name, possessive(to.name), to.name, to.dev, to.flags)
	}
	return ""
}

// possessive is name's possessive ("the coordinator's").
func possessive(name string) string { return name + "'s" }

// isTimeout reports whether err is the request's own timeout.
func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// cutOff reports whether the connection ended without an answer: what a
// TLS server may do with a plaintext request (capgate's own listeners
// answer it 400 "use https://"; a proxy or another server may close it).
func cutOff(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

// hostPort is u's host with its port, the scheme's when it names none.
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// speaksTLS reports whether a TLS handshake with host completes. The
// probe sends no request and no credential, only a ClientHello; the
// certificate is not checked because the question is only whether the
// server speaks TLS (the real request then verifies it).
func speaksTLS(ctx context.Context, host string) bool {
	ctx, cancel := context.WithTimeout(ctx, tlsProbeTimeout)
	defer cancel()
	d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}} //nolint:gosec // a probe: nothing is sent over it
	conn, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}
