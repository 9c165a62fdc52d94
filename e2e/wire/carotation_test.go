package wire_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/harness"
	"github.com/capgate/capgate/gateway"
	"github.com/capgate/capgate/tlsconf"
)

// TestCARotationWithoutRestart: the CA is replaced on disk — the
// bundle every part trusts (gateway.coordinator_tls.ca_file, the
// coordinator's client_ca_file) holds the new CA alone, and every
// certificate is issued again by it — while a gateway syncs with the
// coordinator at https://127.0.0.1:… (an IP literal, verified against
// the certificate's IP SAN). The coordinator restarts on its new
// certificate, so the gateway must dial again: it verifies the new
// certificate against the new CA and syncs, without a restart of its
// own. Before, its CA bundle was read once at start (dayone2 #1): every
// poll failed "certificate signed by unknown authority" until the
// gateway was restarted.
func TestCARotationWithoutRestart(t *testing.T) {
	reload := func(c *tlsconf.ServerConfig) { c.ReloadInterval = time.Millisecond }
	s, pki := startTLS(t, 1, func(cfg *coordinator.Config) { reload(&cfg.TLS.ServerConfig) },
		func(_ int, cfg *gateway.Config) { reload(&cfg.TLS.ServerConfig) })
	gw := s.GatewayURLs()[0]
	probe, err := pki.HTTPClient("", 30*time.Second) // follows the CA file too
	if err != nil {
		t.Fatal(err)
	}
	const ok = `capgate_gateway_sync_polls_total{result="ok"}`
	harness.Eventually(t, 20*time.Second, "the gateway syncs over TLS", func() (bool, string) {
		return metric(t, probe, gw, ok) > 0, "no sync poll answered yet"
	})

	if err := pki.RotateCA(); err != nil {
		t.Fatal(err)
	}
	co := s.Coordinator()
	if err := co.Stop(); err != nil {
		t.Fatal(err)
	}
	// Nothing answers a poll while it is down; the probe's client needs
	// its reload interval to trust the gateway's new certificate.
	var before float64
	harness.Eventually(t, 20*time.Second, "the probe reads the gateway's metrics under the new CA", func() (bool, string) {
		status, _, err := get(probe, gw+"/healthz", "")
		if err != nil || status != 200 {
			return false, fmt.Sprintf("%d %v", status, err)
		}
		before = metric(t, probe, gw, ok)
		return true, ""
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := co.Start(ctx); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 30*time.Second, "the gateway syncs with the coordinator's new certificate", func() (bool, string) {
		now := metric(t, probe, gw, ok)
		status, body, _ := get(probe, gw+"/readyz", "")
		return now > before && status == 200, fmt.Sprintf("ok polls %v (%v before the restart); readyz %d %s", now, before, status, body)
	})
}
