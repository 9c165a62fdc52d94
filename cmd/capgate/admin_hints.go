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
	"syscall"
	"time"
)

// tlsProbeTimeout bounds the handshake connectHint tries when a plain
// http:// request was cut off.
const tlsProbeTimeout = 3 * time.Second

// connectHint is err, from a request to rawURL that got no HTTP answer
// within wait, with what to do about it; err unchanged when there is
// nothing to add.
func connectHint(ctx context.Context, rawURL string, wait time.Duration, err error) error {
	u, perr := url.Parse(rawURL)
	if perr != nil || ctx.Err() != nil {
		return err
	}
	hint := transportHint(u, wait, err)
	if hint == "" && u.Scheme == "http" && cutOff(err) {
		if speaksTLS(ctx, hostPort(u)) {
			hint = fmt.Sprintf("the server speaks TLS: use https://%s (and --cacert or $CAPGATE_CACERT if its CA is your own)", u.Host)
		} else {
			// A Kafka port — the broker's, the gateway's Kafka listener
			// (capgate dev: 9092, 9093) — closes on an HTTP request:
			// "connection reset by peer" and no more (newuser5).
			hint = fmt.Sprintf("%s closed the connection without an HTTP answer: is it a Kafka port (a broker, a gateway's Kafka listener) rather than the coordinator's HTTP address? Point --coordinator or CAPGATE_COORDINATOR_URL at the coordinator (capgate dev: http://127.0.0.1:7070)", u.Host)
		}
	}
	if hint == "" {
		return err
	}
	return fmt.Errorf("%w (%s)", err, hint)
}

// transportHint is the fix for the errors that name their cause.
func transportHint(u *url.URL, wait time.Duration, err error) string {
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var verify *tls.CertificateVerificationError
	var dns *net.DNSError
	switch {
	case errors.As(err, &unknownCA):
		return "the server's certificate is signed by a CA this command does not trust: pass --cacert FILE or set CAPGATE_CACERT (capgate dev --tls writes capgate-data/tls/ca.crt)"
	case errors.As(err, &hostname):
		return fmt.Sprintf("the server's certificate is not for %s: use a host name it names, or check --coordinator / CAPGATE_COORDINATOR_URL", u.Hostname())
	case errors.As(err, &verify):
		return "the server's certificate did not verify: check --cacert / CAPGATE_CACERT"
	case u.Scheme == "https" && (errors.As(err, new(tls.RecordHeaderError)) || errors.Is(err, http.ErrSchemeMismatch)):
		return fmt.Sprintf("the server speaks plain HTTP: use http://%s", u.Host)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Sprintf("nothing listens at %s: is the coordinator running (capgate dev, or capgate coordinator)? Point --coordinator or CAPGATE_COORDINATOR_URL at it", u.Host)
	case errors.As(err, &dns):
		return fmt.Sprintf("host %q not found: check --coordinator / CAPGATE_COORDINATOR_URL", u.Hostname())
	case isTimeout(err):
		// capgate dev's embedded Kafka (9092) takes an HTTP request
		// and never answers: a minute, then this bare (newuser5); the
		// SDK's join said "request_timeout passed" bare (newuser6).
		return fmt.Sprintf("no answer from %s within %s, where a coordinator answers at once (a revoke within its gateway_timeout): is it the coordinator's HTTP address, not a Kafka port (capgate dev: Kafka 9092, the Kafka listener 9093, the coordinator http://127.0.0.1:7070)? Check --coordinator or CAPGATE_COORDINATOR_URL", u.Host, wait)
	}
	return ""
}

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
