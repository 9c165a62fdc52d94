package gateway

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/broker"
	"github.com/capgate/capgate/ocap"
)

const (
	testIssuer   = "coord-test"
	testAudience = "cluster-test"
	testTopic    = "orders"
)

// harness is one gateway in front of its own kfake cluster, synced by a
// test sync server, with a minter for capabilities.
type harness struct {
	t      testing.TB
	kafka  *broker.Embedded
	kc     *broker.Client // direct to kfake, for producing and baselines
	sync   *syncServer
	ring   *ocap.KeyRing
	minter *ocap.Minter
	gw     *Gateway
	base   string
	client *http.Client
}

// testSettings are what the test coordinator's sync resets carry.
func testSettings() *api.CoordinatorSettings {
	return &api.CoordinatorSettings{Issuer: testIssuer, Audience: testAudience, LeewayMs: 1000, MaxLeaseMs: 600_000,
		GatewayTimeoutMs: 15_000, MaxClockSkewMs: 1000}
}

func testVerifierConfig() ocap.VerifierConfig {
	return ocap.VerifierConfig{Issuer: testIssuer, Audience: testAudience, Leeway: time.Second, MaxLease: 10 * time.Minute}
}

// newHarness starts kfake (topic orders, 4 partitions), the sync server
// and a gateway; edit adjusts the gateway config. It waits for the first
// sync.
func newHarness(t testing.TB, edit func(*Config)) *harness {
	t.Helper()
	h := newHarnessWith(t, harnessOptions{edit: edit})
	h.waitReady()
	return h
}

type harnessOptions struct {
	edit        func(*Config)
	log         *zap.Logger    // default: zaptest at warn
	beforeStart func(*harness) // runs before the gateway starts
}

// newHarnessWith builds the harness without waiting for the first sync.
func newHarnessWith(t testing.TB, o harnessOptions) *harness {
	t.Helper()
	h := &harness{t: t, client: &http.Client{Timeout: 20 * time.Second}}
	var err error
	if h.kafka, err = broker.StartEmbedded(broker.EmbeddedConfig{Topics: map[string]int32{testTopic: 4}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.kafka.Close)
	bcfg := broker.DefaultConfig()
	bcfg.Seeds, bcfg.RequestTimeout = h.kafka.Addrs(), 3*time.Second
	if h.kc, err = broker.New(bcfg, zap.NewNop()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.kc.Close)
	if h.ring, err = ocap.NewKeyRing(rand.Reader, time.Now()); err != nil {
		t.Fatal(err)
	}
	if h.minter, err = ocap.NewMinter(testVerifierConfig(), h.ring, rand.Reader); err != nil {
		t.Fatal(err)
	}
	h.sync = newSyncServer(t, h.ring.JWKS().Keys)
	cfg := testConfig(h.sync, bcfg)
	if o.edit != nil {
		o.edit(&cfg)
	}
	if o.log == nil {
		o.log = zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	}
	if o.beforeStart != nil {
		o.beforeStart(h)
	}
	h.gw = startGateway(t, cfg, o.log)
	h.base = "http://" + h.gw.Addr()
	return h
}

func testConfig(s *syncServer, bcfg broker.Config) Config {
	cfg := DefaultConfig()
	cfg.ID, cfg.Listen = "gw-test", "127.0.0.1:0"
	cfg.CoordinatorURL, cfg.SyncToken = s.srv.URL, Secret(s.token)
	cfg.SyncWait, cfg.SyncTimeout = 300*time.Millisecond, 3*time.Second
	cfg.ReadTimeout, cfg.WriteTimeout, cfg.ShutdownTimeout = 2*time.Second, 5*time.Second, 5*time.Second
	cfg.MaxWait = 15 * time.Second
	cfg.Broker = bcfg
	return cfg
}

func startGateway(t testing.TB, cfg Config, log *zap.Logger) *Gateway {
	t.Helper()
	g, err := New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return g
}

// waitFor polls cond until it holds or 30 s pass (a deadline only: the
// race run on 2 busy cores is slow); only for waiting on real sockets and
// brokers.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (h *harness) waitReady() {
	waitFor(h.t, "first sync", func() bool { return h.gw.syncRefusal(time.Now()) == "" })
}

// capClaims is a fetch capability on orders/p for member-1 of group g at
// epoch 1.
func capClaims(p int32) ocap.Claims {
	return ocap.Claims{Subject: "member-1", Group: "g", Topic: testTopic, Partition: &p, Epoch: 1, Ops: ocap.Ops(ocap.OpFetch)}
}

// withOps replaces the ops of c.
func withOps(c ocap.Claims, names ...string) ocap.Claims {
	ops, err := ocap.ParseOps(names)
	if err != nil {
		panic(err)
	}
	c.Ops = ops
	return c
}

func (h *harness) mint(c ocap.Claims) (string, *ocap.Claims) {
	h.t.Helper()
	tok, claims, err := h.minter.Mint(ocap.KindCapability, c, time.Now(), 5*time.Minute)
	if err != nil {
		h.t.Fatal(err)
	}
	return tok, claims
}

// produce writes n records to orders/p directly and returns them.
func (h *harness) produce(p int32, n int) []*kgo.Record {
	h.t.Helper()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{
			Key:       []byte(fmt.Sprintf("key-%d", i)),
			Value:     []byte(fmt.Sprintf("value-%d-%s", i, strings.Repeat("x", i))),
			Headers:   []kgo.RecordHeader{{Key: "h", Value: []byte(fmt.Sprint(i))}},
			Timestamp: time.UnixMilli(1_700_000_000_000 + int64(i)),
		}
	}
	recs[0].Key = nil
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := h.kc.Produce(ctx, testTopic, p, recs); err != nil {
		h.t.Fatal(err)
	}
	return recs
}

// response is a decoded HTTP answer.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) errorCode() api.Code {
	var e api.ErrorBody
	if json.Unmarshal(r.body, &e) != nil {
		return ""
	}
	return e.Error.Code
}

func (r response) fetch(t testing.TB) api.FetchResponse {
	t.Helper()
	var f api.FetchResponse
	if err := json.Unmarshal(r.body, &f); err != nil {
		t.Fatalf("decode fetch %d %s: %v", r.status, r.body, err)
	}
	return f
}

func (h *harness) do(method, path, token string, body io.Reader, header ...string) response {
	h.t.Helper()
	req, err := http.NewRequest(method, h.base+path, body)
	if err != nil {
		h.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := h.client.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return response{resp.StatusCode, resp.Header, b}
}

func recordsURL(p int32) string {
	return fmt.Sprintf("/v1/topics/%s/partitions/%d/records", testTopic, p)
}

func recordsPath(p int32, query string) string { return recordsURL(p) + "?" + query }

func (h *harness) get(token, path string, header ...string) response {
	h.t.Helper()
	return h.do(http.MethodGet, path, token, nil, header...)
}

// expectError checks status and error code of r.
func expectError(t testing.TB, r response, status int, code api.Code) {
	t.Helper()
	if r.status != status || r.errorCode() != code {
		t.Fatalf("got %d %s, want %d %s", r.status, r.body, status, code)
	}
	if ct := r.header.Get("Content-Type"); ct != api.MediaJSON {
		t.Fatalf("error Content-Type %q", ct)
	}
}

// rawExchange writes raw bytes on a fresh connection and reads one
// response.
func rawExchange(t testing.TB, addr, raw string) response {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	go func() { _, _ = io.WriteString(conn, raw) }()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{resp.StatusCode, resp.Header, b}
}
