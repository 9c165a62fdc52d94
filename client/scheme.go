package client

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/capgate/capgate/tlsconf"
)

// SchemeError is a request whose URL's scheme is not what the server's
// port speaks: http:// to a TLS port (capgate's TLS listeners answer it
// 400 with tlsconf.HeaderTLSRequired), or https:// to a plaintext one
// (the handshake reads an HTTP answer, or no TLS record). It is a
// configuration error: the consumer and the producer never retry it.
type SchemeError struct {
	Op string
	// Base is the server's scheme://host the request went to.
	Base string
	// ServerTLS: the port speaks TLS (the URL said http://); false: the
	// URL said https:// to a port that does not.
	ServerTLS bool
	// Err is the transport's error (nil for the 400 answer).
	Err error
}

func (e *SchemeError) Error() string {
	const hint = "(a TLS/plaintext mismatch: not retried; check the URL's scheme in Config.Gateways / Config.CoordinatorURL or NewProducer's URLs; the CLI's --gateways / --coordinator"
	if e.ServerTLS {
		return fmt.Sprintf("client: %s: %s speaks TLS: use https:// %s; and trust its CA: Config.TLS.CAFile or WithTLS, the CLI's --cacert)", e.Op, e.Base, hint)
	}
	return fmt.Sprintf("client: %s: %s does not speak TLS: use http://, or turn TLS on at that server %s): %v", e.Op, e.Base, hint, e.Err)
}

func (e *SchemeError) Unwrap() error { return e.Err }

// schemeOfAnswer is the SchemeError of a plaintext request a TLS port
// answered 400, else nil.
func schemeOfAnswer(op string, resp *http.Response) error {
	if resp.StatusCode != http.StatusBadRequest || resp.Header.Get(tlsconf.HeaderTLSRequired) == "" {
		return nil
	}
	return &SchemeError{Op: op, Base: baseOf(resp.Request), ServerTLS: true}
}

// schemeOfFailure is the SchemeError of an https:// request to a port
// that does not speak TLS (net/http's ErrSchemeMismatch when it answered
// HTTP, a tls.RecordHeaderError when it sent anything else), else nil.
func schemeOfFailure(op string, req *http.Request, err error) error {
	var header tls.RecordHeaderError
	if !errors.Is(err, http.ErrSchemeMismatch) && !errors.As(err, &header) {
		return nil
	}
	return &SchemeError{Op: op, Base: baseOf(req), Err: err}
}

// baseOf is scheme://host of r's URL.
func baseOf(r *http.Request) string {
	if r == nil || r.URL == nil {
		return "the server"
	}
	return (&url.URL{Scheme: r.URL.Scheme, Host: r.URL.Host}).String()
}
