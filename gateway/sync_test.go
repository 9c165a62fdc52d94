package gateway

import (
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/ocap"
)

func TestReadinessBeforeAndAfterFirstSync(t *testing.T) {
	h := newHarnessWith(t, harnessOptions{beforeStart: func(h *harness) { h.sync.setFailing(true) }})
	tok, _ := h.mint(capClaims(0))
	h.sync.waitPolls(t, 2) // the gateway tried, and failed, twice
	expectError(t, h.get("", "/readyz"), http.StatusServiceUnavailable, api.CodeNotReady)
	r := h.get(tok, recordsPath(0, "offset=0"))
	expectError(t, r, http.StatusServiceUnavailable, api.CodeNotReady)
	if r.header.Get("Retry-After") != "1" {
		t.Fatalf("Retry-After %q", r.header.Get("Retry-After"))
	}
	if r := h.get("", "/healthz"); r.status != http.StatusOK {
		t.Fatalf("healthz %d", r.status)
	}
	h.sync.setFailing(false)
	h.waitReady()
	if r := h.get("", "/readyz"); r.status != http.StatusOK {
		t.Fatalf("readyz after sync: %d %s", r.status, r.body)
	}
	if r := h.get(tok, recordsPath(0, "offset=0")); r.status != http.StatusOK {
		t.Fatalf("fetch after sync: %d %s", r.status, r.body)
	}
}

func TestSelfFenceAfterSyncTimeout(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.SyncWait, c.SyncTimeout = 200*time.Millisecond, time.Second })
	tok, _ := h.mint(capClaims(0))
	if r := h.get(tok, recordsPath(0, "offset=0")); r.status != http.StatusOK {
		t.Fatalf("fetch while synced: %d", r.status)
	}
	h.sync.setFailing(true)
	var r response
	waitFor(t, "self-fencing", func() bool {
		r = h.get(tok, recordsPath(0, "offset=0"))
		return r.status != http.StatusOK
	})
	expectError(t, r, http.StatusServiceUnavailable, api.CodeOutOfSync)
	if r.header.Get("Retry-After") == "" {
		t.Fatal("no Retry-After")
	}
	expectError(t, h.get("", "/readyz"), http.StatusServiceUnavailable, api.CodeOutOfSync)
	expectError(t, h.do(http.MethodPost, recordsURL(0), tok, nil), http.StatusServiceUnavailable, api.CodeOutOfSync)
	h.sync.setFailing(false)
	waitFor(t, "resync", func() bool { return h.get(tok, recordsPath(0, "offset=0")).status == http.StatusOK })
}

func TestKeyRotationRetiresRemovedKeys(t *testing.T) {
	h := newHarness(t, nil)
	tok, _ := h.mint(capClaims(0))
	if r := h.get(tok, recordsPath(0, "offset=0")); r.status != http.StatusOK {
		t.Fatalf("before rotation: %d", r.status)
	}
	ring, err := ocap.NewKeyRing(rand.Reader, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	seq := h.sync.push(api.SyncResponse{Keys: ring.JWKS().Keys})
	h.sync.waitAck(t, seq)
	// The token is in the verified-token cache; the removed key must flush it.
	expectError(t, h.get(tok, recordsPath(0, "offset=0")), http.StatusUnauthorized, api.CodeUnauthorized)
	minter, _ := ocap.NewMinter(testVerifierConfig(), ring, rand.Reader)
	fresh, _, _ := minter.Mint(ocap.KindCapability, capClaims(0), time.Now(), time.Minute)
	if r := h.get(fresh, recordsPath(0, "offset=0")); r.status != http.StatusOK {
		t.Fatalf("token of the new key: %d %s", r.status, r.body)
	}
}

// TestCoordinatorRestartResetsView: after the coordinator forgets its log,
// the gateway's poll (after > seq) gets a snapshot that replaces the view.
func TestCoordinatorRestartResetsView(t *testing.T) {
	h := newHarness(t, nil)
	tok, claims := h.mint(capClaims(0))
	seq := h.sync.push(api.SyncResponse{Denied: []api.Denied{{JTI: claims.ID, Exp: int64(claims.ExpiresAt)}}})
	h.sync.waitAck(t, seq)
	expectError(t, h.get(tok, recordsPath(0, "offset=0")), http.StatusConflict, api.CodeCapabilityRevoked)
	h.sync.restart()
	waitFor(t, "the snapshot applied", func() bool { return h.gw.view.Seq() == 1 })
	if r := h.get(tok, recordsPath(0, "offset=0")); r.status != http.StatusOK {
		t.Fatalf("after the reset: %d %s", r.status, r.body)
	}
}

func TestCloseDrainsInFlightFetches(t *testing.T) {
	h := newHarness(t, nil)
	tok, _ := h.mint(capClaims(0))
	done := make(chan response, 1)
	go func() { done <- h.get(tok, recordsPath(0, "offset=0&max_wait_ms=12000")) }()
	waitFor(t, "the fetch in flight", func() bool { return h.gw.inflight.count() == 1 })
	start := time.Now()
	if err := h.gw.Close(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	expectError(t, r, http.StatusServiceUnavailable, api.CodeUnavailable)
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Fatalf("Close took %v", elapsed)
	}
}

// TestKeyRotationRetiresCachedCredentials is redteam10 #2, the attack as
// its test: a client credential that verified once is cached by its
// exact token (Gateway.credentials), and that cache was never flushed
// when its key left the ring — so a credential signed by a retired (say,
// leaked) key went on producing over HTTP, and authenticating on the
// Kafka listener, until its own expiry (client_credential_ttl_max: 30
// days by default) on every gateway that had seen it once. A removed
// key flushes both caches.
func TestKeyRotationRetiresCachedCredentials(t *testing.T) {
	h := newHarness(t, nil)
	cred, _ := h.mintCredential([]string{testTopic}, []string{"consume", "produce"}, time.Now(), time.Hour)
	if r := h.produceWith(cred, testTopic, 0); r.status != http.StatusOK {
		t.Fatalf("before rotation: %d %s", r.status, r.body)
	}
	ring, err := ocap.NewKeyRing(rand.Reader, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	seq := h.sync.push(api.SyncResponse{Keys: ring.JWKS().Keys})
	h.sync.waitAck(t, seq)
	expectError(t, h.produceWith(cred, testTopic, 0), http.StatusUnauthorized, api.CodeUnauthorized)
	expectError(t, h.produceTopic(cred, testTopic, oneRecord), http.StatusUnauthorized, api.CodeUnauthorized)
	if _, err := (kafkaGate{h.gw}).VerifyClient(cred, netip.Addr{}, time.Now()); err == nil {
		t.Fatal("the Kafka listener's verification takes a credential of a retired key")
	}
}

// TestNewSettingsForgetEveryVerifiedToken (redteam10 #2): a reset that
// changes the coordinator's settings and its keys at once (a coordinator
// restored with another ring) flushed only the tokens signed by the new
// keys, so a capability and a credential of the removed key, cached,
// went on verifying under the new settings.
func TestNewSettingsForgetEveryVerifiedToken(t *testing.T) {
	h := newHarness(t, nil)
	tok, _ := h.mint(capClaims(0))
	cred, _ := h.mintCredential([]string{testTopic}, []string{"consume", "produce"}, time.Now(), time.Hour)
	if r := h.get(tok, recordsPath(0, "offset=0")); r.status != http.StatusOK {
		t.Fatalf("before: %d %s", r.status, r.body)
	}
	if r := h.produceWith(cred, testTopic, 0); r.status != http.StatusOK {
		t.Fatalf("before: %d %s", r.status, r.body)
	}
	ring, err := ocap.NewKeyRing(rand.Reader, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	h.sync.waitAck(t, h.sync.push(api.SyncResponse{})) // past seq 1: the restart's snapshot is news
	settings := *testSettings()
	settings.LeewayMs = 500
	h.sync.mu.Lock()
	h.sync.keys, h.sync.settings = ring.JWKS().Keys, &settings
	h.sync.mu.Unlock()
	h.sync.restart()
	waitFor(t, "the new settings learned", func() bool {
		s := h.gw.follower.Settings()
		return s != nil && s.Leeway == 500*time.Millisecond && h.gw.view.Seq() == 1
	})
	expectError(t, h.get(tok, recordsPath(0, "offset=0")), http.StatusUnauthorized, api.CodeUnauthorized)
	expectError(t, h.produceWith(cred, testTopic, 0), http.StatusUnauthorized, api.CodeUnauthorized)
}

// TestKeyRotationEndsKafkaCredentialSessions (redteam10 #2): a Kafka
// connection authenticated with a client credential lives as long as
// the credential (KIP-368 session lifetime); its key removed from the
// ring, its next Produce was still written. Now it is refused
// TOPIC_AUTHORIZATION_FAILED, final, like a denied credential's.
func TestKeyRotationEndsKafkaCredentialSessions(t *testing.T) {
	h := newHarnessWith(t, harnessOptions{edit: func(c *Config) { c.KafkaListen = "127.0.0.1:0" }})
	h.waitReady()
	cred, _ := h.mintCredential([]string{testTopic}, []string{"consume", "produce"}, time.Now(), time.Hour)
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.gw.KafkaAddr()),
		kgo.SASL(plain.Auth{User: "capgate", Pass: cred}.AsMechanism()),
		kgo.DefaultProduceTopic(testTopic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("before")}).FirstErr(); err != nil {
		t.Fatalf("before rotation: %v", err)
	}
	h.retireKeys()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("a produce on a connection of a retired key's credential: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
}

// retireKeys pushes a key set of a new ring: every key the harness
// minted with is removed (retired) at the gateway.
func (h *harness) retireKeys() {
	h.t.Helper()
	ring, err := ocap.NewKeyRing(rand.Reader, time.Now())
	if err != nil {
		h.t.Fatal(err)
	}
	h.sync.waitAck(h.t, h.sync.push(api.SyncResponse{Keys: ring.JWKS().Keys}))
}

// TestKeyRotationEndsKafkaCapabilitySessions is the attack of a holder
// whose capability's signing key was retired (rotated out, say leaked):
// a Kafka connection that authenticated with it before (assign mode)
// kept fetching — every Fetch admitted under the claims verified at
// SASL — until the capability's exp (up to max_lease), while over HTTP
// the same token was refused at once (redteam10 left it). Now a Fetch of
// such a connection is refused TOPIC_AUTHORIZATION_FAILED and nothing
// written after the rotation is read.
func TestKeyRotationEndsKafkaCapabilitySessions(t *testing.T) {
	h := newHarnessWith(t, harnessOptions{edit: func(c *Config) { c.KafkaListen = "127.0.0.1:0" }})
	h.waitReady()
	token, _ := h.mint(capClaims(0))
	h.produce(0, 2)
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.gw.KafkaAddr()), kgo.SASL(plain.Auth{User: "capgate", Pass: token}.AsMechanism()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{testTopic: {0: kgo.NewOffset().AtStart()}}), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for read := 0; read < 2; {
		f := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("before rotation: read %d of 2: %v", read, err)
		}
		f.EachError(func(_ string, _ int32, err error) { t.Fatalf("before rotation: %v", err) })
		read += f.NumRecords()
	}
	h.retireKeys()
	h.produce(0, 1)
	for {
		f := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("a capability of a retired key still fetching: no refusal before %v", err)
		}
		if n := f.NumRecords(); n > 0 {
			t.Fatalf("a connection of a retired key's capability read %d records written after the rotation", n)
		}
		var refused error
		f.EachError(func(_ string, _ int32, err error) { refused = err })
		if refused != nil {
			if !errors.Is(refused, kerr.TopicAuthorizationFailed) {
				t.Fatalf("refused %v, want TOPIC_AUTHORIZATION_FAILED", refused)
			}
			return
		}
	}
}

// TestKeyRemovedDuringAVerification is redteam20's recommendation #3:
// a capability whose signature verified under a key the sync loop then
// removed — SetKeys and FlushKeys both run while the verification is
// between its check and its cache.Put — was cached after the flush and
// served until its exp (up to max_lease) by a key the coordinator had
// taken out of the ring. Ordered by a hook, not by time: the removal is
// applied and acknowledged while the verification waits before Put.
func TestKeyRemovedDuringAVerification(t *testing.T) {
	h := newHarness(t, nil)
	tok, _ := h.mint(capClaims(0))
	verified, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	h.gw.afterVerify = func() {
		once.Do(func() {
			close(verified)
			<-resume
		})
	}
	first := make(chan response, 1)
	go func() { first <- h.get(tok, recordsPath(0, "offset=0")) }()
	<-verified
	ring, err := ocap.NewKeyRing(rand.Reader, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	seq := h.sync.push(api.SyncResponse{Keys: ring.JWKS().Keys})
	h.sync.waitAck(t, seq)
	close(resume)
	// The request that raced the removal is refused too: its key was
	// gone before it was cached.
	expectError(t, <-first, http.StatusUnauthorized, api.CodeUnauthorized)
	expectError(t, h.get(tok, recordsPath(0, "offset=0")), http.StatusUnauthorized, api.CodeUnauthorized)
	if n := h.gw.cache.Len(); n != 0 {
		t.Fatalf("%d tokens cached, want none of the removed key", n)
	}
}

// TestGatewayRefusedItsIDStopsServingAtOnce: a 409 conflict on a sync
// poll means another process holds this gateway's id at the coordinator
// (two processes under one gateway.id; after a coordinator restart or
// takeover whichever polls first holds it), so that process's
// acknowledgements count for this id and revocations complete without
// this gateway applying them. It served its stale view until
// sync_timeout after its last good poll; it refuses at once now (503
// not_ready naming the conflict), and serves again once the coordinator
// accepts its polls.
func TestGatewayRefusedItsIDStopsServingAtOnce(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.SyncTimeout = 10 * time.Second }) // outlasts the test's refusals
	tok, _ := h.mint(capClaims(0))
	path := recordsPath(0, "offset=0")
	if r := h.get(tok, path); r.status != http.StatusOK {
		t.Fatalf("before: %d %s", r.status, r.body)
	}
	h.sync.setConflicting(true)
	h.sync.push(api.SyncResponse{}) // ends the poll held now; the next is refused
	waitFor(t, "the conflict seen", func() bool { return h.gw.refusedReason() != "" })
	r := h.get(tok, path)
	expectError(t, r, http.StatusServiceUnavailable, api.CodeNotReady)
	if !strings.Contains(string(r.body), "another instance") {
		t.Fatalf("the 503 does not say why: %s", r.body)
	}
	expectError(t, h.do(http.MethodPost, recordsURL(0), tok, nil), http.StatusServiceUnavailable, api.CodeNotReady)
	h.sync.setConflicting(false)
	waitFor(t, "serving again", func() bool { return h.get(tok, path).status == http.StatusOK })
}
