package coordinator_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/broker"
	"github.com/capgate/capgate/coordinator"
)

// env is one test world: an embedded Kafka, a data directory, admin and
// sync tokens, and captured logs. Coordinators started from it share the
// directory, so a second start is a restart.
type env struct {
	t          testing.TB
	kafka      *broker.Embedded
	broker     *broker.Client
	dir        string
	cfg        coordinator.Config
	adminToken string
	syncToken  string
	logs       *observer.ObservedLogs
	log        *zap.Logger
	seed       uint64
	topics     map[string]int32
	clientTLS  *tls.Config // the harness client's, when cfg.TLS is on

	secretsMu sync.Mutex
	secrets   []string // every token handed out, checked against the logs
}

func newEnv(t testing.TB, topics map[string]int32) *env {
	t.Helper()
	return newEnvBrokers(t, topics, 1)
}

// newEnvBrokers is newEnv on a kfake cluster of brokers brokers.
func newEnvBrokers(t testing.TB, topics map[string]int32, brokers int) *env {
	t.Helper()
	kafka, err := broker.StartEmbedded(broker.EmbeddedConfig{Topics: topics, Brokers: brokers})
	if err != nil {
		t.Fatalf("start kafka: %v", err)
	}
	t.Cleanup(kafka.Close)
	bcfg := broker.DefaultConfig()
	bcfg.Seeds = kafka.Addrs()
	client, err := broker.New(bcfg, zap.NewNop())
	if err != nil {
		t.Fatalf("broker client: %v", err)
	}
	t.Cleanup(client.Close)
	core, logs := observer.New(zapcore.DebugLevel)
	e := &env{t: t, kafka: kafka, broker: client, dir: t.TempDir(), logs: logs, log: zap.New(core), topics: topics}
	admin, adminHash, err := coordinator.GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	sync, syncHash, err := coordinator.GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	e.adminToken, e.syncToken = admin, sync
	e.remember(admin, sync)
	cfg := coordinator.DefaultConfig()
	cfg.DataDir = e.dir
	cfg.Broker = bcfg
	cfg.AdminTokenHashes = []string{adminHash}
	cfg.SyncTokenHashes = []string{syncHash}
	cfg.Groups.HeartbeatWait = 2 * time.Second
	cfg.Groups.SyncWaitMax = time.Second
	// The tests read a first join's grants in its answer: the join
	// window (group/window.go) is on only where a test says so.
	cfg.Groups.InitialAssignDelay = 0
	cfg.MetadataInterval = 200 * time.Millisecond
	cfg.ShutdownTimeout = 3 * time.Second
	e.cfg = cfg
	return e
}

// fill appends n records to every partition of every topic, so commits
// at offsets up to n are within the log (the coordinator refuses an
// offset beyond a partition's end).
func (e *env) fill(t testing.TB, n int) {
	t.Helper()
	for topic, partitions := range e.topics {
		for p := range partitions {
			recs := make([]*kgo.Record, n)
			for i := range recs {
				recs[i] = &kgo.Record{Value: []byte("x")}
			}
			if _, err := e.broker.Produce(context.Background(), topic, p, recs); err != nil {
				t.Fatalf("fill %s/%d: %v", topic, p, err)
			}
		}
	}
}

func (e *env) remember(tokens ...string) {
	e.secretsMu.Lock()
	e.secrets = append(e.secrets, tokens...)
	e.secretsMu.Unlock()
}

// checkLogs fails if any token handed out appears in any log entry.
func (e *env) checkLogs(t testing.TB) {
	t.Helper()
	e.secretsMu.Lock()
	defer e.secretsMu.Unlock()
	for _, entry := range e.logs.All() {
		text := entry.Message + fmt.Sprint(entry.ContextMap())
		for _, s := range e.secrets {
			if s != "" && strings.Contains(text, s) {
				t.Fatalf("log entry %q contains a token", entry.Message)
			}
		}
	}
}

// harness is one running coordinator.
type harness struct {
	env    *env
	c      *coordinator.Coordinator
	base   string
	client *http.Client
	done   chan error
	once   sync.Once
}

func (e *env) start(t testing.TB, opts ...coordinator.Option) *harness {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.seed++
	opts = append([]coordinator.Option{coordinator.WithListener(ln), coordinator.WithBroker(e.broker),
		coordinator.WithRand(rand.New(rand.NewPCG(e.seed, 7)))}, opts...)
	c, err := coordinator.New(e.cfg, e.log, opts...)
	if err != nil {
		t.Fatalf("new coordinator: %v", err)
	}
	h := &harness{
		env: e, c: c, base: c.URL(), done: make(chan error, 1),
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2048, MaxConnsPerHost: 0, TLSClientConfig: e.clientTLS}, Timeout: 30 * time.Second},
	}
	go func() { h.done <- c.Run(context.Background()) }()
	t.Cleanup(func() { h.stop(t) })
	return h
}

// stop closes the coordinator and waits for Run, which must succeed.
func (h *harness) stop(t testing.TB) {
	if err := h.stopErr(); err != nil {
		t.Errorf("run: %v", err)
	}
}

// stopErr closes the coordinator and returns Run's error (nil on a second
// call).
func (h *harness) stopErr() error {
	var err error
	h.once.Do(func() {
		h.c.Close()
		err = <-h.done
		h.client.CloseIdleConnections()
	})
	return err
}

// do sends a request; body is JSON-encoded unless it is a string or nil.
func (h *harness) do(t testing.TB, method, path, token string, body any) (int, []byte, http.Header) {
	t.Helper()
	status, out, header, err := h.try(method, path, token, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return status, out, header
}

func (h *harness) try(method, path, token string, body any) (int, []byte, http.Header, error) {
	var reader io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		reader = strings.NewReader(b)
	case []byte:
		reader = bytes.NewReader(b)
	default:
		enc, err := json.Marshal(b)
		if err != nil {
			return 0, nil, nil, err
		}
		reader = bytes.NewReader(enc)
	}
	req, err := http.NewRequest(method, h.base+path, reader)
	if err != nil {
		return 0, nil, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if reader != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, resp.Header, err
}

// call sends a request, requires want, and decodes the answer into out.
func (h *harness) call(t testing.TB, method, path, token string, body any, want int, out any) {
	t.Helper()
	status, b, _ := h.do(t, method, path, token, body)
	if status != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, path, status, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, path, b, err)
		}
	}
}

// errorCode decodes an error body's code.
func errorCode(t testing.TB, b []byte) api.Code {
	t.Helper()
	var body api.ErrorBody
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatalf("not an error body: %s", b)
	}
	return body.Error.Code
}

// expectError requires status and code.
func (h *harness) expectError(t testing.TB, method, path, token string, body any, status int, code api.Code) http.Header {
	t.Helper()
	got, b, header := h.do(t, method, path, token, body)
	if got != status || errorCode(t, b) != code {
		t.Fatalf("%s %s: got %d %s, want %d %s", method, path, got, b, status, code)
	}
	return header
}

// clientCredential mints a client credential through the admin API.
func (h *harness) clientCredential(t testing.TB, groups, topics []string) string {
	t.Helper()
	var out coordinator.ClientResponse
	h.call(t, "POST", "/v1/admin/clients", h.env.adminToken,
		coordinator.ClientRequest{Name: "svc", Groups: groups, Topics: topics, TTLMs: 3600_000}, 200, &out)
	h.env.remember(out.Credential)
	return out.Credential
}

// describe is GET /v1/admin/groups/{g}.
func (h *harness) describe(t testing.TB, group string) coordinator.GroupDescription {
	t.Helper()
	var d coordinator.GroupDescription
	h.call(t, "GET", "/v1/admin/groups/"+group, h.env.adminToken, nil, 200, &d)
	return d
}

// member is a consumer driven by a test.
type member struct {
	h      *harness
	group  string
	id     string
	token  string
	mu     sync.Mutex
	grants map[string]api.Grant // "topic/partition" → latest grant
	resync bool                 // heartbeats say resync (resyncHeartbeat)
}

func partitionKey(topic string, partition int32) string {
	return fmt.Sprintf("%s/%d", topic, partition)
}

func (h *harness) join(t testing.TB, group, credential string, req api.JoinRequest) *member {
	t.Helper()
	var resp api.JoinResponse
	h.call(t, "POST", "/v1/groups/"+group+"/join", credential, req, 200, &resp)
	m := &member{h: h, group: group, id: resp.MemberID, token: resp.MemberToken, grants: map[string]api.Grant{}}
	m.apply(nil, resp.Grants, nil)
	h.env.remember(resp.MemberToken)
	return m
}

func (m *member) apply(revoke []api.PartitionRef, grants, renew []api.Grant) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, g := range append(append([]api.Grant{}, grants...), renew...) {
		m.grants[partitionKey(g.Topic, g.Partition)] = g
		m.h.env.remember(g.Capability)
	}
	_ = revoke
}

func (m *member) grant(topic string, partition int32) (api.Grant, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g, ok := m.grants[partitionKey(topic, partition)]
	return g, ok
}

// heartbeat sends one heartbeat and records what it got.
func (m *member) heartbeat(t testing.TB, waitMs int64) api.HeartbeatResponse {
	t.Helper()
	resp, err := m.tryHeartbeat(waitMs)
	if err != nil {
		t.Fatalf("member %s: %v", m.id, err)
	}
	return resp
}

// tryHeartbeat is heartbeat for goroutines (no t.Fatal).
func (m *member) tryHeartbeat(waitMs int64) (api.HeartbeatResponse, error) {
	var resp api.HeartbeatResponse
	status, b, _, err := m.h.try("POST", "/v1/groups/"+m.group+"/heartbeat", m.token, api.HeartbeatRequest{WaitMs: waitMs, Resync: m.resync})
	if err != nil {
		return resp, err
	}
	if status != 200 {
		return resp, fmt.Errorf("heartbeat: %d %s", status, b)
	}
	if err := json.Unmarshal(b, &resp); err != nil {
		return resp, err
	}
	m.apply(resp.Revoke, resp.Grants, resp.Renew)
	return resp, nil
}

// heldHeartbeat starts a heartbeat in the background.
func (m *member) heldHeartbeat(waitMs int64) <-chan heartbeatResult {
	out := make(chan heartbeatResult, 1)
	go func() {
		resp, err := m.tryHeartbeat(waitMs)
		out <- heartbeatResult{resp, err}
	}()
	return out
}

type heartbeatResult struct {
	resp api.HeartbeatResponse
	err  error
}

func (r heartbeatResult) must(t testing.TB) api.HeartbeatResponse {
	t.Helper()
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.resp
}

// settle heartbeats every member (releasing what is revoked at the
// offsets given by offset) until every partition of the group is owned and
// member i owns want[i] partitions.
func settle(t testing.TB, h *harness, members []*member, want []int, offset func(api.PartitionRef) int64) {
	t.Helper()
	eventually(t, func() string {
		for _, m := range members {
			resp := m.heartbeat(t, 50)
			m.releaseAll(t, resp.Revoke, offset)
		}
		d := h.describe(t, members[0].group)
		count := map[string]int{}
		for _, p := range d.Partitions {
			if p.State != "owned" {
				return fmt.Sprintf("partition %s/%d is %s", p.Topic, p.Partition, p.State)
			}
			count[p.Owner]++
		}
		for i, m := range members {
			if count[m.id] != want[i] {
				return fmt.Sprintf("member %d owns %d, want %d", i, count[m.id], want[i])
			}
		}
		return ""
	})
}

// metric scrapes /metrics and returns the value of the first sample line
// starting with name (-1 if absent).
func (h *harness) metric(t testing.TB, name string) float64 {
	t.Helper()
	_, b, _ := h.do(t, "GET", "/metrics", "", nil)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, name+" ") {
			var v float64
			fmt.Sscan(strings.TrimPrefix(line, name+" "), &v)
			return v
		}
	}
	return -1
}

// claimsOf decodes a token's payload without verifying it.
func claimsOf(t testing.TB, token string) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(payload, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// commit commits offset for a partition with the capability the member
// holds for it and returns the status and body.
func (m *member) commit(t testing.TB, topic string, partition int32, offset int64, release bool) (int, []byte) {
	t.Helper()
	g, ok := m.grant(topic, partition)
	if !ok {
		t.Fatalf("member %s holds no capability for %s", m.id, partitionKey(topic, partition))
	}
	status, b, _ := m.h.do(t, "POST", "/v1/groups/"+m.group+"/commit", m.token, api.CommitRequest{
		Offsets: []api.CommitOffset{{Topic: topic, Partition: partition, Offset: offset, Capability: g.Capability}},
		Release: release,
	})
	return status, b
}

// releaseAll answers revokes: commits and releases each revoked partition.
// A stale_epoch answer means the handoff already finished without the
// release (e.g. a revoke re-sent after a restart): like the SDK, ignore it.
func (m *member) releaseAll(t testing.TB, revoke []api.PartitionRef, offset func(api.PartitionRef) int64) {
	t.Helper()
	for _, r := range revoke {
		status, b := m.commit(t, r.Topic, r.Partition, offset(r), true)
		if status != 200 && (status != 409 || errorCode(t, b) != api.CodeStaleEpoch) {
			t.Fatalf("release %v: %d %s", r, status, b)
		}
	}
}

// fakeGateway polls /v1/sync like a gateway: by hand (poll) or in a loop
// that acknowledges everything at once (run).
type fakeGateway struct {
	h  *harness
	id string

	mu      sync.Mutex
	seq     uint64
	replies []api.SyncResponse
	errs    int
	changed chan struct{} // closed and replaced on every reply
	stop    chan struct{}
	done    chan struct{}
}

func newGateway(h *harness, id string) *fakeGateway {
	return &fakeGateway{h: h, id: id, changed: make(chan struct{})}
}

// poll sends one poll with after and returns the answer.
func (g *fakeGateway) poll(t testing.TB, after uint64, waitMs int) api.SyncResponse {
	t.Helper()
	r, err := g.tryPoll(after, waitMs)
	if err != nil {
		t.Fatalf("gateway %s poll: %v", g.id, err)
	}
	return r
}

func (g *fakeGateway) tryPoll(after uint64, waitMs int) (api.SyncResponse, error) {
	path := fmt.Sprintf("/v1/sync?gateway=%s&after=%d&wait_ms=%d", g.id, after, waitMs)
	status, b, _, err := g.h.try("GET", path, g.h.env.syncToken, nil)
	if err != nil {
		return api.SyncResponse{}, err
	}
	if status != 200 {
		return api.SyncResponse{}, fmt.Errorf("status %d: %s", status, b)
	}
	var r api.SyncResponse
	if err := json.Unmarshal(b, &r); err != nil {
		return api.SyncResponse{}, err
	}
	g.mu.Lock()
	g.seq = r.Seq
	g.replies = append(g.replies, r)
	close(g.changed)
	g.changed = make(chan struct{})
	g.mu.Unlock()
	return r, nil
}

// refusedPoll sends a held poll in the background; its channel gets nil
// when the poll is refused (503, reset), an error when it is answered.
func (g *fakeGateway) refusedPoll(after uint64, waitMs int) <-chan error {
	out := make(chan error, 1)
	go func() {
		r, err := g.tryPoll(after, waitMs)
		if err == nil {
			out <- fmt.Errorf("sync poll answered %+v", r)
			return
		}
		out <- nil
	}()
	return out
}

// run polls in a loop, each poll acknowledging the previous answer.
func (g *fakeGateway) run(waitMs int) {
	g.stop, g.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(g.done)
		for {
			select {
			case <-g.stop:
				return
			default:
			}
			g.mu.Lock()
			after := g.seq
			g.mu.Unlock()
			if _, err := g.tryPoll(after, waitMs); err != nil {
				g.mu.Lock()
				g.errs++
				g.mu.Unlock()
				select {
				case <-g.stop:
					return
				case <-time.After(20 * time.Millisecond): // back off from a refused poll (shutdown)
				}
			}
		}
	}()
}

func (g *fakeGateway) halt() {
	if g.stop != nil {
		close(g.stop)
		<-g.done
		g.stop = nil
	}
}

// waitFor waits until some reply satisfies pred.
func (g *fakeGateway) waitFor(t testing.TB, what string, pred func(api.SyncResponse) bool) api.SyncResponse {
	t.Helper()
	deadline := time.After(10 * time.Second)
	seen := 0
	for {
		g.mu.Lock()
		replies, changed := g.replies[seen:], g.changed
		seen = len(g.replies)
		g.mu.Unlock()
		for _, r := range replies {
			if pred(r) {
				return r
			}
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("gateway %s: no reply with %s", g.id, what)
		}
	}
}

// transportFrom is h's client transport with its connections coming
// from the loopback address ip (Linux routes all of 127.0.0.0/8 to lo),
// as another client address's would: for limits kept per address.
func (h *harness) transportFrom(ip string) *http.Transport {
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	base, ok := h.client.Transport.(*http.Transport)
	if !ok { // nil: the client's default transport (a replica's harness)
		base = http.DefaultTransport.(*http.Transport)
	}
	transport := base.Clone()
	transport.DialContext = dialer.DialContext
	return transport
}

// fenceAbove matches a sync reply fencing topic/partition above epoch:
// the fence a revoke wrote, not the partition's current epoch that a
// reset snapshot also lists (a gateway whose first poll lands after the
// grant gets one, and its seq is older than the revoke's fence).
func fenceAbove(topic string, partition int32, epoch uint64) func(api.SyncResponse) bool {
	return func(r api.SyncResponse) bool {
		return slices.ContainsFunc(r.Fences, func(f api.Fence) bool {
			return f.Topic == topic && f.Partition == partition && f.Epoch > epoch
		})
	}
}

// eventually retries check until it returns "" or the deadline passes;
// only for waiting on the real server.
func eventually(t testing.TB, check func() string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		msg := check()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %s", msg)
		}
		time.Sleep(10 * time.Millisecond) // polling a real server, not waiting for an event
	}
}
