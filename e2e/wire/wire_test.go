package wire_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/harness"
	"github.com/capgate/capgate/gateway"
	"github.com/capgate/capgate/internal/stack"
	"github.com/capgate/capgate/tlsconf"
)

const topic = "orders"

// startTLS starts kfake, a coordinator and gateways serving TLS with a
// fresh PKI; coordinator and gateway edits run after PKI.Apply's.
func startTLS(t *testing.T, gateways int, coord func(*coordinator.Config), gw func(int, *gateway.Config)) (*stack.Stack, *stack.PKI) {
	t.Helper()
	dir := t.TempDir()
	pki, err := stack.NewPKI(dir)
	if err != nil {
		t.Fatal(err)
	}
	logger := harness.Logger(t)
	opts := stack.Options{Dir: dir, Topics: map[string]int32{topic: 2}, Gateways: gateways, Timing: stack.TestTiming(),
		Logger: func(string) *zap.Logger { return logger }}
	// fasthttp closes a connection that never sent a request only 5 s
	// after accepting it (as net/http does); an HTTP client's spare
	// connection is one. Shutdown must outlast that.
	opts.Coordinator = func(_ int, cfg *coordinator.Config) {
		cfg.ShutdownTimeout = 10 * time.Second
		if coord != nil {
			coord(cfg)
		}
	}
	opts.Gateway = func(i int, cfg *gateway.Config) {
		cfg.ShutdownTimeout = 10 * time.Second
		if gw != nil {
			gw(i, cfg)
		}
	}
	if err := pki.Apply(&opts); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := stack.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s, pki
}

// get sends a GET with an optional bearer and returns status and body.
func get(hc *http.Client, url, bearer string, header ...string) (int, []byte, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// capability mints a shared capability for partition 0 with ops.
func capability(t *testing.T, s *stack.Stack, ops ...string) string {
	t.Helper()
	var c api.CapabilityResponse
	if err := s.MustAdmin(context.Background(), http.MethodPost, "/v1/admin/capabilities",
		coordinator.SharedGrantRequest{Topic: topic, Partition: 0, Ops: ops, TTLMs: 120_000, Holder: "wire-test"}, &c); err != nil {
		t.Fatal(err)
	}
	return c.Capability
}

// produce appends values to partition 0 through the gateway over TLS.
func produce(t *testing.T, s *stack.Stack, hc *http.Client, produceCap string, values ...string) {
	t.Helper()
	var records []api.ProduceRecord
	for _, v := range values {
		records = append(records, api.ProduceRecord{Value: []byte(v)})
	}
	status, raw, err := stack.DoJSON(context.Background(), hc, http.MethodPost, s.GatewayURLs()[0]+"/v1/topics/"+topic+"/partitions/0/records",
		produceCap, api.ProduceRequest{Records: records}, nil)
	if err != nil || status != 200 {
		t.Fatalf("produce: %d %s %v", status, raw, err)
	}
}

// codeOf is the error code of a JSON error answer ("" when it is not one).
func codeOf(raw []byte) api.Code {
	var body api.ErrorBody
	if json.Unmarshal(raw, &body) != nil {
		return ""
	}
	return body.Error.Code
}

// metric reads one sample of a Prometheus counter from url/metrics.
func metric(t *testing.T, hc *http.Client, url, sample string) float64 {
	t.Helper()
	status, body, err := get(hc, url+"/metrics", "")
	if err != nil || status != 200 {
		t.Fatalf("metrics: %d %v", status, err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
			v, err := strconv.ParseFloat(rest, 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	return 0
}

// TestPlaintextAndWrongCARefused: both listeners speak TLS only. Plain
// HTTP to them is answered, in plaintext, 400 "this port speaks TLS: use
// https://" and nothing else (checkPlaintextAnswer); a client that
// trusts another CA, or only the system roots, fails the handshake — the
// SDK's join included; the right CA works.
func TestPlaintextAndWrongCARefused(t *testing.T) {
	s, pki := startTLS(t, 1, nil, nil)
	good, err := pki.HTTPClient("", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	otherPKI, err := stack.NewPKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	wrongCA, err := otherPKI.HTTPClient("", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	systemRoots := &http.Client{Timeout: 10 * time.Second}
	for _, base := range []string{s.CoordinatorURL(), s.GatewayURLs()[0]} {
		if status, _, err := get(good, base+"/healthz", ""); err != nil || status != 200 {
			t.Fatalf("%s with the CA: %d %v", base, status, err)
		}
		checkPlaintextAnswer(t, "http://"+strings.TrimPrefix(base, "https://"))
		if status, _, err := get(good, base+"/healthz", ""); err != nil || status != 200 {
			t.Fatalf("%s with the CA after plaintext requests: %d %v", base, status, err)
		}
		for name, hc := range map[string]*http.Client{"another CA": wrongCA, "system roots": systemRoots} {
			_, _, err := get(hc, base+"/healthz", "")
			var unknown x509.UnknownAuthorityError
			if !errors.As(err, &unknown) {
				t.Errorf("%s trusting %s: %v, want an unknown-authority handshake failure", base, name, err)
			}
		}
	}
	credential, err := s.ClientCredential(context.Background(), "wire", []string{"g"}, []string{topic}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.ClientConfig("g", []string{topic}, credential)
	cfg.TLS = tlsconf.ClientConfig{CAFile: otherPKI.CAFile}
	c, err := client.NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// The SDK retries transport errors until its context ends, so the
	// join fails with the deadline; it must never succeed.
	if err = c.Join(ctx); err == nil {
		t.Fatal("SDK join trusting another CA succeeded")
	}
	c.Close(context.Background())
}

// TestSyncNeedsGatewayCertificate: with tls.sync.auth token+certificate
// and client_names gateway-*, a gateway presenting its own certificate
// syncs; gateways presenting none, a certificate whose name is not a
// gateway's, or one of another CA never sync: they keep failing their
// polls, stay not ready (503 not_ready), and the coordinator never counts
// them as gateways.
func TestSyncNeedsGatewayCertificate(t *testing.T) {
	dir := t.TempDir()
	other, err := stack.NewPKI(dir)
	if err != nil {
		t.Fatal(err)
	}
	strangerCert, strangerKey, err := other.Issue("gateway-9")
	if err != nil {
		t.Fatal(err)
	}
	var rogueCert, rogueKey string
	s, pki := startTLS(t, 1, func(cfg *coordinator.Config) {
		cfg.TLS.Sync = tlsconf.Channel{Auth: tlsconf.AuthTokenAndCertificate, ClientNames: []string{"gateway-*"}}
	}, func(i int, cfg *gateway.Config) {
		switch i {
		case 1: // no client certificate
			cfg.CoordinatorTLS.CertFile, cfg.CoordinatorTLS.KeyFile = "", ""
		case 2: // signed by the CA, but not a gateway's name
			cfg.CoordinatorTLS.CertFile, cfg.CoordinatorTLS.KeyFile = rogueCert, rogueKey
		case 3: // a gateway's name, another CA
			cfg.CoordinatorTLS.CertFile, cfg.CoordinatorTLS.KeyFile = strangerCert, strangerKey
		}
	})
	if rogueCert, rogueKey, err = pki.Issue("consumer-1"); err != nil {
		t.Fatal(err)
	}
	probe, err := pki.HTTPClient("", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var bad []*stack.Gateway
	for range 3 {
		g, err := s.NewGateway()
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		bad = append(bad, g)
	}
	for _, g := range bad {
		harness.Eventually(t, 30*time.Second, g.ID+" failing its sync polls", func() (bool, string) {
			n := metric(t, probe, g.URL, `capgate_gateway_sync_polls_total{result="error"}`)
			return n >= 3, fmt.Sprintf("%v errors", n)
		})
		if ok := metric(t, probe, g.URL, `capgate_gateway_sync_polls_total{result="ok"}`); ok != 0 {
			t.Errorf("%s: %v successful sync polls", g.ID, ok)
		}
		status, body, err := get(probe, g.URL+"/readyz", "")
		if err != nil || status != 503 || !strings.Contains(string(body), string(api.CodeNotReady)) {
			t.Errorf("%s /readyz: %d %s %v, want 503 not_ready", g.ID, status, body, err)
		}
	}
	var gws coordinator.GatewaysResponse
	if err := s.MustAdmin(context.Background(), http.MethodGet, "/v1/admin/gateways", nil, &gws); err != nil {
		t.Fatal(err)
	}
	if len(gws.Gateways) != 1 || gws.Gateways[0].ID != "gateway-1" {
		t.Fatalf("the coordinator knows gateways %+v, want only gateway-1", gws.Gateways)
	}
	if status, _, _ := get(probe, s.GatewayURLs()[0]+"/readyz", ""); status != 200 {
		t.Fatalf("gateway-1 with its certificate: /readyz %d", status)
	}
}

// serials is an HTTP client that records the serial number of the
// server certificate of every TLS connection it opens.
type serials struct {
	mu   sync.Mutex
	seen []string
}

func (s *serials) client(t *testing.T, pki *stack.PKI, keepAlive bool) *http.Client {
	t.Helper()
	cc, err := pki.Client("")
	if err != nil {
		t.Fatal(err)
	}
	tc, err := cc.TLS(nil)
	if err != nil {
		t.Fatal(err)
	}
	tc.VerifyConnection = func(cs tls.ConnectionState) error {
		s.mu.Lock()
		s.seen = append(s.seen, cs.PeerCertificates[0].SerialNumber.String())
		s.mu.Unlock()
		return nil
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tc, DisableKeepAlives: !keepAlive}}
}

func (s *serials) last() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.seen) == 0 {
		return ""
	}
	return s.seen[len(s.seen)-1]
}

// TestCertificateReloadWithoutRestart: the gateway's and the
// coordinator's certificate files are replaced on disk while a consumer
// reads, a fetch long poll is held and the gateway's sync long poll runs.
// New connections get the new certificates without a restart; the long
// poll in flight is answered with the record produced after the swap; the
// consumer reads every record from before and after; the gateway never
// fails a sync poll.
func TestCertificateReloadWithoutRestart(t *testing.T) {
	reload := func(c *tlsconf.ServerConfig) { c.ReloadInterval = time.Millisecond }
	s, pki := startTLS(t, 1, func(cfg *coordinator.Config) { reload(&cfg.TLS.ServerConfig) },
		func(_ int, cfg *gateway.Config) { reload(&cfg.TLS.ServerConfig) })
	gw, coord := s.GatewayURLs()[0], s.CoordinatorURL()
	probe, err := pki.HTTPClient("", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	produceCap, fetchCap := capability(t, s, "produce"), capability(t, s, "fetch")
	produce(t, s, probe, produceCap, "before-1", "before-2")

	credential, err := s.ClientCredential(context.Background(), "reader", []string{"readers"}, []string{topic}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	consumer, err := client.NewConsumer(s.ClientConfig("readers", []string{topic}, credential))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := consumer.Join(ctx); err != nil {
		t.Fatal(err)
	}
	defer consumer.Close(context.Background())
	read := readValues(ctx, t, consumer)
	waitValues(t, read, "before-1", "before-2")

	var gwSerials, coordSerials serials
	fetch := gw + "/v1/topics/" + topic + "/partitions/0/records?offset="
	if status, body, err := get(gwSerials.client(t, pki, true), fetch+"0", fetchCap); err != nil || status != 200 {
		t.Fatalf("fetch before the swap: %d %s %v", status, body, err)
	}
	get(coordSerials.client(t, pki, false), coord+"/healthz", "")
	oldGW, oldCoord := gwSerials.last(), coordSerials.last()
	syncErrors := metric(t, probe, gw, `capgate_gateway_sync_polls_total{result="error"}`)

	// A long poll in flight across the swap, on a connection opened
	// before it.
	var poller serials
	longPoll := poller.client(t, pki, true)
	if status, _, err := get(longPoll, gw+"/healthz", ""); err != nil || status != 200 { // open the connection
		t.Fatal(err)
	}
	polled := make(chan string, 1)
	go func() {
		status, body, err := get(longPoll, fetch+"2&max_wait_ms=20000", fetchCap)
		polled <- fmt.Sprintf("%d %s %v", status, body, err)
	}()

	if _, _, err := pki.Reissue("gateway-1"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := pki.Reissue("coordinator"); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 20*time.Second, "new connections see the new certificates", func() (bool, string) {
		get(gwSerials.client(t, pki, false), gw+"/healthz", "")
		get(coordSerials.client(t, pki, false), coord+"/healthz", "")
		return gwSerials.last() != oldGW && coordSerials.last() != oldCoord, fmt.Sprintf("gateway %s coordinator %s", gwSerials.last(), coordSerials.last())
	})
	newGW := gwSerials.last()
	if status, body, err := get(gwSerials.client(t, pki, false), fetch+"0", fetchCap); err != nil || status != 200 || gwSerials.last() != newGW {
		t.Fatalf("fetch after the swap: %d %s %v (serial %s, want %s)", status, body, err, gwSerials.last(), newGW)
	}
	produce(t, s, probe, produceCap, "after-1")
	select {
	case got := <-polled:
		if !strings.HasPrefix(got, "200 ") || !strings.Contains(got, base64.StdEncoding.EncodeToString([]byte("after-1"))) {
			t.Fatalf("the long poll held across the swap answered %s, want 200 with after-1", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the long poll held across the swap never answered")
	}
	if len(poller.seen) != 1 || poller.seen[0] != oldGW {
		t.Fatalf("the long poll's connection saw certificates %v: it should be the one opened before the swap", poller.seen)
	}
	waitValues(t, read, "after-1")
	if now := metric(t, probe, gw, `capgate_gateway_sync_polls_total{result="error"}`); now != syncErrors {
		t.Fatalf("the gateway failed %v sync polls across the swap", now-syncErrors)
	}
	if status, _, _ := get(probe, gw+"/readyz", ""); status != 200 {
		t.Fatalf("gateway not ready after the swap: %d", status)
	}
}

// readValues polls c until ctx ends, sending every record's value.
func readValues(ctx context.Context, t *testing.T, c *client.Consumer) <-chan string {
	out := make(chan string, 1024)
	go func() {
		for ctx.Err() == nil {
			records, err := c.Poll(ctx)
			if err != nil {
				return
			}
			for _, r := range records {
				out <- string(r.Value)
			}
		}
	}()
	return out
}

// waitValues waits until every value arrived on read.
func waitValues(t *testing.T, read <-chan string, values ...string) {
	t.Helper()
	want := map[string]bool{}
	for _, v := range values {
		want[v] = true
	}
	deadline := time.After(30 * time.Second)
	for len(want) > 0 {
		select {
		case v := <-read:
			delete(want, v)
		case <-deadline:
			t.Fatalf("records %v never arrived", want)
		}
	}
}

// TestConsumerCertificateRequired: with tls.consumers.auth
// token+certificate on gateway and coordinator, a capability alone is
// refused at the gateway (403 client_certificate_required) and so is a
// certificate with a name outside consumers.client_names; the
// coordinator refuses a join with a good client credential, and a
// heartbeat with a good member token, the same two ways; with an allowed
// certificate the fetch, join and heartbeat answer, and the SDK
// configured with it consumes. /healthz needs none.
func TestConsumerCertificateRequired(t *testing.T) {
	s, pki := startTLS(t, 1, func(cfg *coordinator.Config) {
		cfg.TLS.Consumers = tlsconf.Channel{Auth: tlsconf.AuthTokenAndCertificate, ClientNames: []string{"consumer-*"}}
	}, func(_ int, cfg *gateway.Config) {
		cfg.TLS.Consumers = tlsconf.Channel{Auth: tlsconf.AuthTokenAndCertificate, ClientNames: []string{"consumer-*"}}
	})
	produceCap, fetchCap := capability(t, s, "produce"), capability(t, s, "fetch")
	withCert, err := pki.HTTPClient("consumer-1", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	produce(t, s, withCert, produceCap, "x")
	fetch := s.GatewayURLs()[0] + "/v1/topics/" + topic + "/partitions/0/records?offset=0"
	// The coordinator's consumer routes follow the same rule: a join
	// with a good client credential (of its own group, "joins", so the
	// SDK's group below is left alone) is refused without the
	// certificate or with one of another name, and so is the member
	// token of the one join let in when it comes without its certificate.
	joinCred, err := s.ClientCredential(context.Background(), "mtls-join", []string{"joins"}, []string{topic}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	join := s.CoordinatorURL() + "/v1/groups/joins/join"
	var member api.JoinResponse
	cases := []struct {
		name   string
		client string
		status int
	}{{"capability only", "", 403}, {"another name", "admin-1", 403}, {"consumer certificate", "consumer-1", 200}}
	clients := map[string]*http.Client{}
	for _, c := range cases {
		hc, err := pki.HTTPClient(c.client, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		clients[c.client] = hc
		status, body, err := get(hc, fetch, fetchCap)
		if err != nil || status != c.status || (status == 403 && !strings.Contains(string(body), string(api.CodeClientCertificateRequired))) {
			t.Errorf("%s: %d %s %v, want %d", c.name, status, body, err, c.status)
		}
		if status, _, _ := get(hc, s.GatewayURLs()[0]+"/healthz", ""); status != 200 {
			t.Errorf("%s: /healthz %d", c.name, status)
		}
		status, body, err = stack.DoJSON(context.Background(), hc, http.MethodPost, join, joinCred,
			api.JoinRequest{Topics: []string{topic}, SessionTimeoutMs: 30_000}, &member)
		if err != nil || status != c.status || (status == 403 && codeOf(body) != api.CodeClientCertificateRequired) {
			t.Errorf("%s: coordinator join %d %.200s %v, want %d", c.name, status, body, err, c.status)
		}
	}
	if member.MemberToken == "" {
		t.Fatal("no join with the consumer certificate was let in")
	}
	heartbeat := s.CoordinatorURL() + "/v1/groups/joins/heartbeat"
	for _, c := range cases {
		status, body, err := stack.DoJSON(context.Background(), clients[c.client], http.MethodPost, heartbeat, member.MemberToken, api.HeartbeatRequest{WaitMs: 50}, nil)
		if err != nil || status != c.status || (status == 403 && codeOf(body) != api.CodeClientCertificateRequired) {
			t.Errorf("%s: coordinator heartbeat with the member token: %d %.200s %v, want %d", c.name, status, body, err, c.status)
		}
	}
	credential, err := s.ClientCredential(context.Background(), "mtls", []string{"g"}, []string{topic}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.ClientConfig("g", []string{topic}, credential)
	if cfg.TLS, err = pki.Client("consumer-2"); err != nil {
		t.Fatal(err)
	}
	consumer, err := client.NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := consumer.Join(ctx); err != nil {
		t.Fatal(err)
	}
	defer consumer.Close(context.Background())
	waitValues(t, readValues(ctx, t, consumer), "x")
}

// checkPlaintextAnswer sends plaintext requests to plain (a TLS port's
// http:// URL): a GET, a POST whose 32 KiB body outlasts the first read
// (the answer must not be lost to a reset) and a raw request read to
// the server's close. Each gets the plaintext 400 bad_request "this port
// speaks TLS: use https://" with tlsconf.HeaderTLSRequired — before,
// the handshake failed on the first bytes and the connection closed
// without a word (EOF; the SDK retried it for ever as a gateway that
// did not answer).
func checkPlaintextAnswer(t *testing.T, plain string) {
	t.Helper()
	for _, req := range []struct{ method, body string }{{http.MethodGet, ""}, {http.MethodPost, strings.Repeat("x", 32<<10)}} {
		r, err := http.NewRequest(req.method, plain+"/v1/topics/"+topic+"/partitions/0/records", strings.NewReader(req.body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(r)
		if err != nil {
			t.Fatalf("plaintext %s to %s: %v, want a 400 answer", req.method, plain, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e api.ErrorBody
		if resp.StatusCode != http.StatusBadRequest || json.Unmarshal(body, &e) != nil || e.Error.Code != api.CodeBadRequest ||
			e.Error.Message != tlsconf.PlaintextMessage || resp.Header.Get(tlsconf.HeaderTLSRequired) != "https" {
			t.Fatalf("plaintext %s to %s: %d %v %q, want 400 bad_request %q with %s: https",
				req.method, plain, resp.StatusCode, resp.Header, body, tlsconf.PlaintextMessage, tlsconf.HeaderTLSRequired)
		}
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(plain, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(conn)
	if err != nil || !strings.HasPrefix(string(raw), "HTTP/1.1 400 Bad Request\r\n") || !strings.HasSuffix(string(raw), tlsconf.PlaintextMessage+`"}}`) {
		t.Fatalf("raw plaintext request to %s: %q, %v; want the 400 alone, then the connection closed", plain, raw, err)
	}
}
