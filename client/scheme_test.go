package client

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/tlsconf"
)

// tlsGateway serves the fake gateway's routes on a TLS port the way
// capgate's listeners do (tlsconf.Server.HTTPListener: a plaintext
// request is answered 400 "use https://").
func tlsGateway(t *testing.T, s *store) string {
	t.Helper()
	dir := t.TempDir()
	now := time.Now()
	ca, err := tlsconf.NewCA("test CA", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Issue("gateway", []string{"127.0.0.1"}, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := leaf.Write(dir, "gateway")
	if err != nil {
		t.Fatal(err)
	}
	ts, err := tlsconf.NewServer(tlsconf.ServerConfig{CertFile: certFile, KeyFile: keyFile, ReloadInterval: time.Hour}, nil)
	if err != nil {
		t.Fatal(err)
	}
	g := newFakeGateway(t, "tls", s)
	srv := httptest.NewUnstartedServer(g.srv.Config.Handler)
	srv.Listener = ts.HTTPListener(srv.Listener)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// TestSchemeMismatchIsAConfigurationError: a gateway URL whose scheme
// is not what the gateway's port speaks — http:// to a TLS port (it
// answers 400 "use https://"), https:// to a plaintext one — stops the
// consumer at its first fetch with a SchemeError naming the URL, the fix
// and --gateways; the producer returns it at once. Before, the consumer
// retried for ever: a TLS port's closed connection (EOF) read as a
// gateway that did not answer, and a plaintext port's answer to the
// handshake (net/http's ErrSchemeMismatch) as a transport error.
func TestSchemeMismatchIsAConfigurationError(t *testing.T) {
	for _, c := range []struct {
		name      string
		serverTLS bool
		want      string
	}{
		{"http to a TLS port", true, "speaks TLS: use https://"},
		{"https to a plaintext port", false, "does not speak TLS: use http://"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var e *env
			e = newEnv(t, func(int) []api.Grant { return []api.Grant{e.grantOf(p0, 1, 0, "cap-p0")} })
			e.store.append(p0, 3)
			gateway := "https://" + strings.TrimPrefix(e.gw1.srv.URL, "http://")
			if c.serverTLS {
				gateway = "http://" + tlsGateway(t, e.store)
			}
			cfg := e.config()
			cfg.Gateways = []string{gateway}
			consumer := e.start(cfg)
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			_, err := consumer.Poll(ctx)
			var se *SchemeError
			if !errors.As(err, &se) || se.ServerTLS != c.serverTLS || se.Base != gateway {
				t.Fatalf("poll: %v, want a SchemeError for %s (server TLS %v)", err, gateway, c.serverTLS)
			}
			// The Go field the caller set, and the CLI's flag (newuser3 #8).
			for _, want := range []string{c.want, "not retried", "Config.Gateways", "--gateways", gateway} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if consumer.Unanswered() != nil {
				t.Errorf("Unanswered() = %v: a configuration error is no gateway that did not answer", consumer.Unanswered())
			}

			p, err := NewProducer([]string{gateway}, "cap-p0", WithHTTPClient(&http.Client{}))
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Produce(ctx, p0.Topic, p0.Partition, []Record{{Value: []byte("v")}})
			if !errors.As(err, &se) || se.ServerTLS != c.serverTLS {
				t.Fatalf("produce: %v, want a SchemeError", err)
			}
		})
	}
}

// TestUntrustedCertificateNamesTheCAField: a gateway whose certificate
// the consumer does not trust stops it with an error that says where the
// CA goes — the Go field (Config.TLS.CAFile) for a Go caller, the flag
// (--cacert) for the CLI that shares the message (newuser3 #8: it said
// only "--cacert / client.tls").
func TestUntrustedCertificateNamesTheCAField(t *testing.T) {
	var e *env
	e = newEnv(t, func(int) []api.Grant { return []api.Grant{e.grantOf(p0, 1, 0, "cap-p0")} })
	cfg := e.config()
	cfg.Gateways = []string{"https://" + tlsGateway(t, e.store)} // no CA configured
	consumer := e.start(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	_, err := consumer.Poll(ctx)
	for _, want := range []string{"certificate", "not retried", "Config.TLS.CAFile", "--cacert"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("poll: %v, want an error saying %q", err, want)
		}
	}
}
