package coordinator_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/coordinator/leader"
	"github.com/capgate/capgate/store"
)

// replicaSet is n coordinator replicas of one config on one kfake
// cluster, the state in the Kafka log.
type replicaSet struct {
	e        *env
	replicas []*coordinator.Replica
	done     []chan error
}

func startReplicas(t testing.TB, e *env, n int) *replicaSet {
	t.Helper()
	s := &replicaSet{e: e}
	for i := range n {
		s.start(t, i)
	}
	t.Cleanup(func() {
		for i := range s.replicas {
			s.stop(t, i)
		}
	})
	return s
}

func (s *replicaSet) start(t testing.TB, i int) {
	t.Helper()
	s.startEdited(t, i, nil, nil)
}

// startEdited starts replica i with edit applied to its config last, and
// before called before it runs.
func (s *replicaSet) startEdited(t testing.TB, i int, edit func(*coordinator.Config), before func(*coordinator.Replica)) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.e.cfg
	cfg.Replica.ID = fmt.Sprintf("replica-%d", i)
	if edit != nil {
		edit(&cfg)
	}
	s.e.seed++
	r, err := coordinator.NewReplica(cfg, s.e.log, coordinator.WithListener(ln), coordinator.WithBroker(s.e.broker),
		coordinator.WithRand(rand.New(rand.NewPCG(s.e.seed, 7))))
	if err != nil {
		t.Fatalf("replica %d: %v", i, err)
	}
	if before != nil {
		before(r)
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(context.Background()) }()
	for len(s.replicas) <= i {
		s.replicas, s.done = append(s.replicas, nil), append(s.done, nil)
	}
	s.replicas[i], s.done[i] = r, done
}

// stop closes replica i (a second call does nothing).
func (s *replicaSet) stop(t testing.TB, i int) {
	if s.replicas[i] == nil {
		return
	}
	s.replicas[i].Close()
	if err := <-s.done[i]; err != nil {
		t.Errorf("replica %d run: %v", i, err)
	}
	s.replicas[i] = nil
}

// awaitLeader waits until exactly one running replica leads and serves
// and every other one follows naming it (two standbys may both take over
// at once — safe, the later fences the earlier, which steps down), and
// returns its index.
func (s *replicaSet) awaitLeader(t testing.TB) int {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		var waits []<-chan struct{}
		leading, count := -1, 0
		hints := map[string]int{}
		for i, r := range s.replicas {
			if r == nil {
				continue
			}
			role, hint, next := r.Watch()
			waits = append(waits, next)
			switch {
			case role == leader.Leader && r.Leading() != nil:
				leading, count = i, count+1
			case role == leader.Follower:
				hints[hint.URL]++
			}
		}
		if count == 1 && hints[s.replicas[leading].URL()] == len(waits)-1 {
			return leading
		}
		// count > 1 happens: a leader fenced by a later takeover leads in
		// its own eyes until its next write fails fenced.
		select {
		case <-anyOf(waits):
		case <-deadline:
			t.Fatal("no replica leads")
		}
	}
}

// anyOf is closed once any of chans is.
func anyOf(chans []<-chan struct{}) <-chan struct{} {
	out := make(chan struct{})
	for _, c := range chans {
		go func() {
			select {
			case <-c:
			case <-time.After(30 * time.Second):
			}
			select {
			case out <- struct{}{}:
			default:
			}
		}()
	}
	return out
}

// harness is a test client of replica i.
func (s *replicaSet) harness(i int) *harness {
	return &harness{env: s.e, base: s.replicas[i].URL(), client: &http.Client{Timeout: 30 * time.Second}}
}

// A standby answers consumer, sync and admin calls 421 not_leader naming
// the leader's URL (body and Capgate-Leader header), and serves health,
// readiness as a standby, and the leader's JWKS.
func TestStandbyAnswersNotLeader(t *testing.T) {
	s, lead, standby, leaderURL := startLeaderAndStandby(t)
	e := s.e
	h := s.harness(standby)
	for _, call := range []struct{ method, path, token string }{
		{"POST", "/v1/groups/g/join", "x"},
		{"POST", "/v1/groups/g/heartbeat", "x"},
		{"GET", "/v1/sync?gateway=g1&after=0", e.syncToken},
		{"GET", "/v1/admin/groups", e.adminToken},
		{"POST", "/v1/admin/keys/rotate", e.adminToken},
	} {
		status, body, header := h.do(t, call.method, call.path, call.token, nil)
		var eb struct {
			Error struct {
				Code   api.Code `json:"code"`
				Leader *string  `json:"leader"`
			} `json:"error"`
		}
		if err := json.Unmarshal(body, &eb); err != nil {
			t.Fatalf("%s %s: %s", call.method, call.path, body)
		}
		if status != http.StatusMisdirectedRequest || eb.Error.Code != api.CodeNotLeader || eb.Error.Leader == nil ||
			*eb.Error.Leader != leaderURL || header.Get(api.HeaderLeader) != leaderURL {
			t.Fatalf("%s %s at the standby: %d %s %v, want 421 not_leader naming %s", call.method, call.path, status, body, header, leaderURL)
		}
	}
	// A browser at the standby's console is sent to the leader's, same
	// page and query; a console action (POST) still gets the 421.
	noFollow := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(h.base + "/console/groups/g?x=1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTemporaryRedirect || resp.Header.Get("Location") != leaderURL+"/console/groups/g?x=1" {
		t.Fatalf("GET /console/groups/g at the standby: %d Location %q, want 307 to %s", resp.StatusCode, resp.Header.Get("Location"), leaderURL)
	}
	// An absolute-form request target names another host: the redirect
	// still goes to the leader, with only the target's path and query.
	u, _ := url.Parse(h.base)
	raw, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	fmt.Fprintf(raw, "GET http://evil.example/console/groups?y=2 HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n")
	absResp, err := http.ReadResponse(bufio.NewReader(raw), nil)
	if err != nil {
		t.Fatal(err)
	}
	absResp.Body.Close()
	if absResp.StatusCode != http.StatusTemporaryRedirect || absResp.Header.Get("Location") != leaderURL+"/console/groups?y=2" {
		t.Fatalf("absolute-form GET at the standby: %d Location %q, want 307 to %s/console/groups?y=2", absResp.StatusCode, absResp.Header.Get("Location"), leaderURL)
	}
	if status, body, _ := h.do(t, "POST", "/console/login", "", nil); status != http.StatusMisdirectedRequest {
		t.Fatalf("POST /console/login at the standby: %d %s, want 421", status, body)
	}
	var ready map[string]any // the leader's has checks too
	h.call(t, "GET", "/readyz", "", nil, 200, &ready)
	if ready["role"] != "follower" || ready["leader"] != leaderURL {
		t.Fatalf("standby /readyz: %v", ready)
	}
	s.harness(lead).call(t, "GET", "/readyz", "", nil, 200, &ready)
	if ready["role"] != "leader" {
		t.Fatalf("leader /readyz: %v", ready)
	}
}

// The leader stops: a standby takes over (fence, read to the end, serve)
// with everything the log holds — the member keeps heartbeating with its
// member token without rejoining, its partitions keep their epochs, its
// committed offsets are there, and a credential minted before works.
func TestReplicaTakesOverWhenTheLeaderStops(t *testing.T) {
	e := newEnvBrokers(t, map[string]int32{"orders": 4}, 3)
	e.fill(t, 100)
	useKafkaState(t, e)
	s := startReplicas(t, e, 3)
	first := s.awaitLeader(t)
	h := s.harness(first)
	creds := h.clientCredential(t, []string{"g"}, []string{"orders"})
	m := h.join(t, "g", creds, api.JoinRequest{ClientID: "a", Topics: []string{"orders"}, SessionTimeoutMs: 10000})
	settle(t, h, []*member{m}, []int{4}, nil)
	for p := range int32(4) {
		if status, body := m.commit(t, "orders", p, 10+int64(p), false); status != 200 {
			t.Fatalf("commit: %d %s", status, body)
		}
	}
	before := h.describe(t, "g")

	stopped := time.Now()
	s.stop(t, first)
	second := s.awaitLeader(t)
	t.Logf("takeover: %s from the leader's stop to a new leader serving", time.Since(stopped))
	h2 := s.harness(second)
	m.h = h2
	resp, err := m.tryHeartbeat(0)
	if err != nil {
		t.Fatalf("heartbeat at the new leader without rejoining: %v", err)
	}
	if len(resp.Revoke) != 0 {
		t.Fatalf("the takeover revoked %v", resp.Revoke)
	}
	after := h2.describe(t, "g")
	if len(after.Partitions) != len(before.Partitions) {
		t.Fatalf("%d partitions after the takeover, %d before", len(after.Partitions), len(before.Partitions))
	}
	for i, p := range after.Partitions {
		b := before.Partitions[i]
		if p.Epoch != b.Epoch || p.Owner != b.Owner || p.State != b.State || p.Committed == nil || *p.Committed != *b.Committed {
			t.Fatalf("partition %d after the takeover %+v, before %+v", p.Partition, p, b)
		}
	}
	if len(after.Members) != 1 || after.Members[0].ID != m.id {
		t.Fatalf("members after the takeover: %+v", after.Members)
	}
	h2.join(t, "g", creds, api.JoinRequest{ClientID: "b", Topics: []string{"orders"}})

	// The stopped replica comes back as a standby naming the new leader.
	s.start(t, first)
	newURL := s.replicas[second].URL()
	eventually(t, func() string {
		if role, hint, _ := s.replicas[first].Watch(); role != leader.Follower || hint.URL != newURL {
			return fmt.Sprintf("restarted replica: %s naming %+v", role, hint)
		}
		return ""
	})
}

// A leader deposed behind its back (another writer fenced the shard) is a
// zombie: its next write — a beat or a Ready — fails fenced, it steps
// down at once and answers not_leader; nothing it wrote after the fence
// is in the log; leadership comes back to one replica.
func TestZombieLeaderIsFencedAndStepsDown(t *testing.T) {
	e := newEnvBrokers(t, map[string]int32{"orders": 2}, 3)
	useKafkaState(t, e)
	s := startReplicas(t, e, 1)
	s.awaitLeader(t)
	zombie := s.replicas[0]
	h := s.harness(0)
	creds := h.clientCredential(t, []string{"g"}, []string{"orders"})
	h.join(t, "g", creds, api.JoinRequest{ClientID: "a", Topics: []string{"orders"}})
	_, _, changed := zombie.Watch()

	// The usurper: the same shard's transactional id, opened elsewhere.
	usurper, err := store.OpenKafka(context.Background(), stateLogOptions(t, e, "usurper"))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(20 * time.Second):
		t.Fatal("the fenced leader did not step down")
	}
	if role, _, _ := zombie.Watch(); role == leader.Leader {
		t.Fatalf("fenced leader still leads")
	}
	expectNotLeader := func() string {
		status, body, _, err := h.try("POST", "/v1/groups/g/join", creds, api.JoinRequest{ClientID: "zombie", Topics: []string{"orders"}})
		if err != nil {
			return err.Error()
		}
		if status != http.StatusMisdirectedRequest && status != http.StatusServiceUnavailable {
			return fmt.Sprintf("join at the deposed leader: %d %s", status, body)
		}
		return ""
	}
	if msg := expectNotLeader(); msg != "" {
		t.Fatal(msg)
	}
	snap, err := usurper.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range snap.Groups {
		for _, m := range g.Members {
			if m.ClientID == "zombie" {
				t.Fatal("the deposed leader's member reached the log")
			}
		}
	}
	if len(snap.Groups) != 1 || len(snap.Groups[0].Members) != 1 {
		t.Fatalf("the usurper read %+v, want the one member the leader persisted", snap.Groups)
	}
	usurper.Close() // silent: the replica takes the shard back after its lease
	s.awaitLeader(t)
	h.join(t, "g", creds, api.JoinRequest{ClientID: "b", Topics: []string{"orders"}})
	if got := h.metric(t, "capgate_coordinator_replica_stepdowns_total"); got < 1 {
		t.Fatalf("stepdowns %v, want >= 1", got)
	}
}

// Every replica serves the same JWKS (the ring lives in the log, sealed
// with the KEK); a rotation at the leader reaches the standbys' JWKS, and
// after a takeover the new leader signs with the rotated key.
func TestReplicasShareOneKeyRing(t *testing.T) {
	e := newEnvBrokers(t, map[string]int32{"orders": 1}, 3)
	useKafkaState(t, e)
	s := startReplicas(t, e, 3)
	lead := s.awaitLeader(t)
	jwks := func(i int) (api.JWKS, string) {
		var set api.JWKS
		status, body, _ := s.harness(i).do(t, "GET", "/.well-known/jwks.json", "", nil)
		if status != 200 {
			return set, fmt.Sprintf("replica %d: %d %s", i, status, body)
		}
		if err := json.Unmarshal(body, &set); err != nil {
			t.Fatal(err)
		}
		return set, ""
	}
	same := func() string {
		want, msg := jwks(lead)
		if msg != "" {
			return msg
		}
		for i := range s.replicas {
			if s.replicas[i] == nil {
				continue
			}
			got, msg := jwks(i)
			if msg != "" {
				return msg
			}
			if !reflect.DeepEqual(got, want) {
				return fmt.Sprintf("replica %d serves %+v, the leader %+v", i, got, want)
			}
		}
		return ""
	}
	eventually(t, same)
	before, _ := jwks(lead)

	var rotated struct {
		Current string `json:"current"`
	}
	s.harness(lead).call(t, "POST", "/v1/admin/keys/rotate", e.adminToken, nil, 200, &rotated)
	if rotated.Current == "" {
		t.Fatal("rotate named no current key")
	}
	eventually(t, same)
	if now, _ := jwks(lead); reflect.DeepEqual(now, before) {
		t.Fatal("rotation changed nothing")
	}

	s.stop(t, lead)
	lead = s.awaitLeader(t)
	h := s.harness(lead)
	creds := h.clientCredential(t, []string{"g"}, []string{"orders"})
	m := h.join(t, "g", creds, api.JoinRequest{ClientID: "a", Topics: []string{"orders"}})
	settle(t, h, []*member{m}, []int{1}, nil)
	g, ok := m.grant("orders", 0)
	if !ok {
		t.Fatal("no grant")
	}
	if kid := headerKid(t, g.Capability); kid != rotated.Current {
		t.Fatalf("new leader signs with %s, want the rotated key %s", kid, rotated.Current)
	}
	eventually(t, same)
}

func headerKid(t *testing.T, token string) string {
	t.Helper()
	parts := strings.Split(token, ".")
	b, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		t.Fatal(err)
	}
	var header struct {
		Kid string `json:"kid"`
	}
	if err := json.Unmarshal(b, &header); err != nil {
		t.Fatal(err)
	}
	return header.Kid
}

// Two replicas left with the same replica.id (both default to the
// coordinator id) still elect one leader and the other follows it: the
// follower tells the leader's commits from its own by the advertised URL.
func TestReplicasWithTheSameIDStillFollow(t *testing.T) {
	e := newEnvBrokers(t, map[string]int32{"orders": 1}, 3)
	useKafkaState(t, e)
	s := &replicaSet{e: e}
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		r, err := coordinator.NewReplica(e.cfg, e.log, coordinator.WithListener(ln), coordinator.WithBroker(e.broker))
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- r.Run(context.Background()) }()
		s.replicas, s.done = append(s.replicas, r), append(s.done, done)
	}
	t.Cleanup(func() {
		for i := range s.replicas {
			s.stop(t, i)
		}
	})
	lead := s.awaitLeader(t) // the other follows naming it
	if got := e.logs.FilterMessageSnippet("another coordinator replica writes under this replica's id").Len(); got == 0 {
		t.Fatal("the shared id was not reported")
	}
	h := s.harness(lead)
	h.clientCredential(t, []string{"g"}, []string{"orders"})
}

// The attack on a deposed leader that has not written since it was
// deposed: a gateway's reset poll would be answered from its memory
// (fences possibly older than the new leader's). The answer must wait for
// the log to confirm the replica still leads — Kafka's fencing, not the
// lease running out — so the poll gets not_leader, never a 200 snapshot.
// Beats are 2 s apart here, so the poll lands well before the zombie's
// next beat would have told it.
func TestDeposedLeaderAnswersNoSyncPoll(t *testing.T) {
	e := newEnvBrokers(t, map[string]int32{"orders": 2}, 3)
	useKafkaState(t, e)
	e.cfg.Replica.BeatInterval, e.cfg.Replica.LeaseTimeout = 2*time.Second, 4*time.Second
	s := startReplicas(t, e, 1)
	s.awaitLeader(t)
	h := s.harness(0)
	creds := h.clientCredential(t, []string{"g"}, []string{"orders"})
	h.join(t, "g", creds, api.JoinRequest{ClientID: "a", Topics: []string{"orders"}})
	if status, body, _ := h.do(t, "GET", "/v1/sync?gateway=gw1&after=0", e.syncToken, nil); status != http.StatusOK {
		t.Fatalf("sync at the leader: %d %s", status, body)
	}

	usurper, err := store.OpenKafka(context.Background(), stateLogOptions(t, e, "usurper"))
	if err != nil {
		t.Fatal(err)
	}
	defer usurper.Close()
	status, body, _ := h.do(t, "GET", "/v1/sync?gateway=gw1&after=0", e.syncToken, nil)
	if status == http.StatusOK {
		t.Fatalf("the deposed leader answered a sync poll from memory: %s", body)
	}
	if status != http.StatusMisdirectedRequest && status != http.StatusServiceUnavailable {
		t.Fatalf("sync at the deposed leader: %d %s, want 421 or 503", status, body)
	}
}
