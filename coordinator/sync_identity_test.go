package coordinator_test

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/tlsconf"
)

// syncTLSEnv is a TLS coordinator's environment whose sync routes take
// auth and gateway-* certificates.
func syncTLSEnv(t *testing.T, auth string) (*env, *testPKI) {
	t.Helper()
	e := newEnv(t, map[string]int32{"orders": 1})
	p := newTestPKI(t)
	e.cfg.TLS.CertFile, e.cfg.TLS.KeyFile = p.files(t, "coordinator")
	e.cfg.TLS.ClientCAFile = p.caFile(t)
	e.cfg.TLS.Sync = tlsconf.Channel{Auth: auth, ClientNames: []string{"gateway-*"}}
	e.clientTLS = &tls.Config{RootCAs: p.pool}
	return e, p
}

// clientNamed is an HTTP client presenting a certificate with common
// name cn and the DNS names dns (besides 127.0.0.1).
func (p *testPKI) clientNamed(t testing.TB, cn string, dns ...string) *http.Client {
	t.Helper()
	l, err := p.ca.Issue(cn, append([]string{"127.0.0.1"}, dns...), time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := l.Write(p.dir, cn+"-named")
	if err != nil {
		t.Fatal(err)
	}
	tc, err := tlsconf.ClientConfig{CAFile: p.caFile(t), CertFile: cert, KeyFile: key}.TLS(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: 10 * time.Second}
}

// syncAs sends a sync request over c with the sync token and returns the
// status and, on 200, the poll's answer (else the error code).
func syncAs(t testing.TB, c *http.Client, method, url, token string) (int, api.SyncResponse, api.Code) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r api.SyncResponse
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, r, errorCode(t, b)
	}
	if method == http.MethodGet {
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("%s %s: %s: %v", method, url, b, err)
		}
	}
	return resp.StatusCode, r, ""
}

// TestSyncIdentityBoundToCertificate: with tls.sync asking for a gateway
// certificate, gateway B's certificate (a valid gateway certificate,
// allowed by client_names, with the sync token) cannot poll, ack or leave
// as gateway A: 403 gateway_identity_mismatch, and the revoke waiting for
// A's ack keeps waiting, A stays known; A's own ack answers it. A
// certificate's DNS names count as its names too.
func TestSyncIdentityBoundToCertificate(t *testing.T) {
	e, p := syncTLSEnv(t, tlsconf.AuthTokenAndCertificate)
	e.cfg.Groups.GatewayTimeout = time.Minute // silence never decides here
	h := e.start(t)
	clientA, clientB := p.client(t, "gateway-a"), p.client(t, "gateway-b")
	sync := func(c *http.Client, method, gateway, query string) (int, api.SyncResponse, api.Code) {
		path := "/v1/sync?gateway=" + gateway + query
		if method == http.MethodPost {
			path = "/v1/sync/leave?gateway=" + gateway
		}
		return syncAs(t, c, method, h.base+path, e.syncToken)
	}
	_, r, _ := sync(clientA, "GET", "gateway-a", "&wait_ms=0")
	creds := h.clientCredential(t, []string{"g"}, []string{"orders"})
	m := h.join(t, "g", creds, api.JoinRequest{Topics: []string{"orders"}})
	old, _ := m.grant("orders", 0)
	revoked := revokeInBackground(h, "/v1/admin/groups/g/partitions/orders/0/revoke")
	for fenced := false; !fenced; { // A reads up to the revoke's fence, acknowledging only what came before it
		status, next, code := sync(clientA, "GET", "gateway-a", "&wait_ms=1000&after="+strconv.FormatUint(r.Seq, 10))
		if status != 200 {
			t.Fatalf("gateway-a's own poll: %d %s", status, code)
		}
		for _, f := range next.Fences {
			fenced = fenced || f.Epoch > old.Epoch
		}
		r = next
	}

	for _, c := range []struct{ method, query string }{
		{"GET", "&wait_ms=0&after=" + strconv.FormatUint(r.Seq, 10)}, // B acking A's fence
		{"GET", "&wait_ms=0"}, // B polling as A
		{"POST", ""},          // B making A leave
	} {
		if status, _, code := sync(clientB, c.method, "gateway-a", c.query); status != 403 || code != api.CodeGatewayIdentityMismatch {
			t.Fatalf("gateway-b's certificate: %s as gateway-a%s: %d %s, want 403 %s", c.method, c.query, status, code, api.CodeGatewayIdentityMismatch)
		}
	}
	if ids := gatewayIDList(t, h); len(ids) != 1 || ids[0] != "gateway-a" {
		t.Fatalf("gateways after B's attempts: %v, want [gateway-a]", ids)
	}
	revokeStillWaiting(t, h, revoked, "gateway-b's certificate spoke for gateway-a")
	if status, _, code := sync(clientA, "GET", "gateway-a", "&wait_ms=50&after="+strconv.FormatUint(r.Seq, 10)); status != 200 {
		t.Fatalf("gateway-a's ack: %d %s", status, code)
	}
	if got := <-revoked; got.Epoch != old.Epoch+1 {
		t.Fatalf("revoke answer %+v after gateway-a's ack, want epoch %d", got, old.Epoch+1)
	}

	clientC := p.clientNamed(t, "gateway-c", "gateway-c.internal")
	for id, want := range map[string]int{"gateway-c": 200, "gateway-c.internal": 200, "gateway-c.internal.evil": 403, "gateway-b": 403} {
		if status, _, _ := sync(clientC, "GET", id, "&wait_ms=0"); status != want {
			t.Errorf("gateway-c's certificate polling as %s: %d, want %d", id, status, want)
		}
	}
	if status, _, code := sync(clientB, "GET", "gateway-b", "&wait_ms=0"); status != 200 {
		t.Fatalf("gateway-b as itself: %d %s", status, code)
	}
	e.checkLogs(t)
}

// TestSyncIdentityBindingOff: tls.sync_bind_identity false lets a gateway
// certificate name any gateway id (fleets whose certificates are not
// named after their ids).
func TestSyncIdentityBindingOff(t *testing.T) {
	e, p := syncTLSEnv(t, tlsconf.AuthCertificate)
	e.cfg.TLS.SyncBindIdentity = false
	h := e.start(t)
	if status, _, code := syncAs(t, p.client(t, "gateway-b"), "GET", h.base+"/v1/sync?gateway=edge-7&wait_ms=0", ""); status != 200 {
		t.Fatalf("binding off: gateway-b's certificate polling as edge-7: %d %s", status, code)
	}
}
