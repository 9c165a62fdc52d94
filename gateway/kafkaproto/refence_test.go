package kafkaproto

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/client/session"
)

// A carry-over (a KIP-368 re-authentication moving the member onto the
// client's new credential) rejoins the capgate member, and the
// coordinator fences and grants back what it holds: those revokes are
// the gateway's business, the Kafka client must not be told to give its
// partitions up (TestKgoReauthenticatesAcrossCredentialExpiry failed so
// in about 2 of 5 runs on two busy cores). These tests play the
// coordinator over a real socket, answering the member's joins and
// heartbeats in the exact order that went wrong.

var (
	refenceP0 = session.Partition{Topic: "t", Partition: 0}
	refenceP1 = session.Partition{Topic: "t", Partition: 1}
)

// TestRefenceOfAGrantTheMemberNeverSaw: the order of the CI failure. A
// carry-over's regrant is minted against the heartbeat held when it came
// — presented with the member token of the credential being replaced,
// about to expire — and dropped (a capability never outlives its member
// token), though the coordinator counts it as sent. The next carry-over,
// before that grant came back as a renewal, fences the epoch the member
// never saw: a revoke above the epoch marked when the rejoin was sent.
// Before, only a revoke at or below the mark counted as the carry-over's
// fence, so this one reached the client as an ordinary revoke.
func TestRefenceOfAGrantTheMemberNeverSaw(t *testing.T) {
	c, m := startScriptedMember(t)
	h := carriedOver(t, c, m, refenceP0, refenceP1)
	h.reply(t, api.HeartbeatResponse{}) // the regrant at epoch 2, dropped
	h = c.next(t, "heartbeat")

	second := carryOverTo(m, "credential-3")
	j := c.next(t, "join")
	h.reply(t, fence(2, refenceP0, refenceP1)) // the epoch-2 grant, fenced
	clientKeeps(t, m, "after the second carry-over fenced a grant the member never saw")
	regrantedAfter(t, c, m, j, second)
}

// TestRefenceAfterAGrantOnItsWay: the other order of the same race. A
// grant is on its way to the gateway (a carry-over's regrant) when the
// next carry-over's rejoin is sent; it arrives, and then the rejoin's
// fence of it. Before, any grant ended its partition's mark, so that
// fence reached the client as an ordinary revoke.
func TestRefenceAfterAGrantOnItsWay(t *testing.T) {
	c, m := startScriptedMember(t)
	h := carriedOver(t, c, m, refenceP0, refenceP1)

	second := carryOverTo(m, "credential-3")
	j := c.next(t, "join")
	h.reply(t, grants(2, refenceP0, refenceP1)) // the first carry-over's regrant
	clientKeeps(t, m, "after the first carry-over's regrant")
	j.reply(t, api.JoinResponse{MemberID: "cg-1", MemberToken: "member-token-3"})
	<-second
	h = nextBeat(t, c, "member-token-3")
	h.reply(t, fence(2, refenceP0, refenceP1)) // the second one's fence of it
	clientKeeps(t, m, "after the second carry-over fenced a grant that arrived after its rejoin was sent")
	regrantedOn(t, c, m, nextBeat(t, c, "member-token-3"))
}

// TestRefenceMarkEndsAfterTheCarryOver: a partition the rejoin did not
// fence (the coordinator was moving it: nothing to revoke) keeps its mark
// only until the answer of a heartbeat sent after the rejoin was answered
// — every revoke the rejoin made has arrived by then. A later revoke of
// it is an ordinary one: the client is told (else it would wait the
// rebalance timeout, unread).
func TestRefenceMarkEndsAfterTheCarryOver(t *testing.T) {
	c, m := startScriptedMember(t)
	h := carriedOver(t, c, m, refenceP0)
	h.reply(t, grants(2, refenceP0))
	h = c.next(t, "heartbeat") // sent after the rejoin's answer
	clientKeeps(t, m, "after the carry-over")
	h.reply(t, api.HeartbeatResponse{})
	h = c.next(t, "heartbeat")
	h.reply(t, api.HeartbeatResponse{Revoke: []api.PartitionRef{{Topic: "t", Partition: 1, Epoch: 1}}}) // p1 moves on
	c.next(t, "heartbeat")
	if gone := toldToGiveUp(t, m); !slices.Equal(gone, []session.Partition{refenceP1}) {
		t.Fatalf("after a revoke of %v once the carry-over was over, the client was told to give up %v, want just that partition", refenceP1, gone)
	}
}

// TestCarryOverRenewsInPlace: with a coordinator that takes renew_token,
// a carry-over renews the capgate member in place — the rejoin presents
// the member's token beside the new credential, the answer renews its
// capabilities under the same epochs, and no fence follows: nothing is
// marked as fenced (the client's fetches and commits never pause), the
// next heartbeat presents the new member token, and a later revoke at
// the epoch the member holds is a real move, told to the client. With a
// coordinator from before it (every other test here) the plain rejoin
// fences and the fence window pauses the client instead.
func TestCarryOverRenewsInPlace(t *testing.T) {
	c, m, h, done := carryOverStarted(t)
	j := renewalOfCG1(t, c, "the carry-over")
	m.mu.Lock()
	marked := len(m.refencing)
	m.mu.Unlock()
	if marked != 0 {
		t.Fatalf("a renewal in place marked %d partitions as awaiting a fence", marked)
	}
	j.reply(t, api.JoinResponse{MemberID: "cg-1", MemberToken: "member-token-2", Grants: grants(1, refenceP0, refenceP1).Grants})
	<-done
	h.reply(t, api.HeartbeatResponse{})
	h = nextBeat(t, c, "member-token-2")
	renewedInPlace(t, m, "after the renewal")
	h.reply(t, fence(1, refenceP1)) // p1 moves on
	c.next(t, "heartbeat")
	if gone := toldToGiveUp(t, m); !slices.Equal(gone, []session.Partition{refenceP1}) {
		t.Fatalf("after a revoke of %v following the renewal, the client was told to give up %v, want just that partition", refenceP1, gone)
	}
}

// TestCarryOverIsRetriedPastATakeover: the carry-over's rejoin meets a
// coordinator that cannot answer it now — the leading replica killed or
// frozen and a standby taking over answers 503 unavailable (or nothing
// at all) — and is sent again, as the SDK's driver retries its own
// carry-over: the second rejoin renews the member in place, and the
// heartbeat held meanwhile presents the new member token. Before, the
// first failure ended the carry-over ("not carried over … it ends with
// its member token"): the member ended with the old credential, every
// partition was taken from the client and what it had read since its
// last commit was read again (e2e/ha, a kgo client renewing its token
// as the leader was killed: ~800 records read twice).
func TestCarryOverIsRetriedPastATakeover(t *testing.T) {
	c, m, h, done := carryOverStarted(t)
	c.next(t, "join").reply(t, api.ErrorBody{Error: api.Error{Code: api.CodeUnavailable, Message: "candidate: taking over the shard"}})
	j := renewalOfCG1(t, c, "the carry-over's retry")
	j.reply(t, api.JoinResponse{MemberID: "cg-1", MemberToken: "member-token-2", Grants: grants(1, refenceP0, refenceP1).Grants})
	<-done
	h.reply(t, api.HeartbeatResponse{})
	nextBeat(t, c, "member-token-2")
	renewedInPlace(t, m, "after the renewal retried")
}

// carryOverStarted starts a member (startScriptedMember) at a coordinator
// that takes renew_token and carries it over to credential-2 in the
// background: the heartbeat held then, and the carry-over's end.
func carryOverStarted(t *testing.T) (*scriptedCoordinator, *member, *coordinatorCall, <-chan struct{}) {
	t.Helper()
	c, m := startScriptedMember(t)
	c.mu.Lock()
	c.renews = true
	c.mu.Unlock()
	h := c.next(t, "heartbeat")
	return c, m, h, carryOverTo(m, "credential-2")
}

// renewalOfCG1 is the member's next join, which must renew cg-1 in place
// (renew_token member-token-1) with credential-2.
func renewalOfCG1(t *testing.T, c *scriptedCoordinator, what string) *coordinatorCall {
	t.Helper()
	j := c.next(t, "join")
	var join api.JoinRequest
	if json.Unmarshal(j.body, &join) != nil || join.MemberID != "cg-1" || join.RenewToken != "member-token-1" || j.bearer != "credential-2" {
		t.Fatalf("%s sent %s with bearer %q, want a renewal of cg-1 (renew_token member-token-1) with credential-2", what, j.body, j.bearer)
	}
	return j
}

// renewedInPlace fails t unless the client keeps both partitions and the
// session fetches them at epoch 1: nothing fenced, nothing moved.
func renewedInPlace(t *testing.T, m *member, when string) {
	t.Helper()
	clientKeeps(t, m, when)
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range []session.Partition{refenceP0, refenceP1} {
		if info, _ := m.sess.Inspect(p); info.State != session.Fetching || info.Epoch != 1 {
			t.Errorf("%v: %v at epoch %d %s, want fetching at 1", p, info.State, info.Epoch, when)
		}
	}
}

// startScriptedMember starts a KIP-848 member of group g on this gateway
// against a coordinator the test plays, granted t/0 and t/1 at epoch 1,
// and hands the client its assignment.
func startScriptedMember(t *testing.T) (*scriptedCoordinator, *member) {
	t.Helper()
	c := &scriptedCoordinator{calls: make(chan *coordinatorCall), done: make(chan struct{})}
	srv := httptest.NewServer(c)
	s := &Server{cfg: Config{RequestTimeout: 30 * time.Second, MaxWait: 500 * time.Millisecond}, log: zap.NewNop()}
	s.groups = &groups{s: s, api: client.NewGroupAPI(srv.URL, nil, 0), byID: map[memberRef]*member{}, byKey: map[clientKey][]*member{}}
	m := &member{g: s.groups, group: "g", id: "kafka-member", kip848: true, credential: "credential-1",
		sessionTimeout: time.Minute, rebalanceTimeout: time.Minute, log: zap.NewNop()}
	started := make(chan error, 1)
	go func() {
		started <- m.start(context.Background(), api.JoinRequest{ClientID: "c", Topics: []string{"t"}})
	}()
	t.Cleanup(func() {
		m.mu.Lock()
		m.finishLocked()
		m.mu.Unlock()
		close(c.done)
		srv.Close()
		s.wg.Wait()
	})
	c.next(t, "join").reply(t, api.JoinResponse{MemberID: "cg-1", MemberToken: "member-token-1",
		SessionTimeoutMs: 60_000, HeartbeatWaitMs: 10_000, Grants: grants(1, refenceP0, refenceP1).Grants})
	if err := <-started; err != nil {
		t.Fatalf("join: %v", err)
	}
	if _, assignment, ok := m.rejoin848(time.Now()); !ok || len(assignment) != 2 {
		t.Fatalf("the client was assigned %v, want both partitions", assignment)
	}
	return c, m
}

// carriedOver runs the member's first carry-over: its rejoin (checked),
// the coordinator's fence of fenced at epoch 1 on the held heartbeat
// before the rejoin's answer, as the coordinator sends them. It returns
// the heartbeat held after.
func carriedOver(t *testing.T, c *scriptedCoordinator, m *member, fenced ...session.Partition) *coordinatorCall {
	t.Helper()
	h := c.next(t, "heartbeat")
	done := carryOverTo(m, "credential-2")
	j := c.next(t, "join")
	var join api.JoinRequest
	if json.Unmarshal(j.body, &join) != nil || join.MemberID != "cg-1" || j.bearer != "credential-2" {
		t.Fatalf("the carry-over sent %s with bearer %q, want a rejoin of cg-1 with credential-2", j.body, j.bearer)
	}
	h.reply(t, fence(1, fenced...))
	j.reply(t, api.JoinResponse{MemberID: "cg-1", MemberToken: "member-token-2"})
	<-done
	h = nextBeat(t, c, "member-token-2")
	clientKeeps(t, m, "after the first carry-over's fence")
	return h
}

// nextBeat is the member's next heartbeat, which must present token. A
// heartbeat the driver sends while a carry-over's rejoin is in flight is
// held until the rejoin is answered and then presents the member token
// it answered: sent at once, with the token of the credential being
// replaced (about to expire), the coordinator minted the rejoin's regrant
// against it and dropped it — the partitions stayed fenced, unread, until
// their renewal.
func nextBeat(t *testing.T, c *scriptedCoordinator, token string) *coordinatorCall {
	t.Helper()
	h := c.next(t, "heartbeat")
	if h.bearer != token {
		t.Fatalf("the heartbeat after the carry-over presented %q, want %q: sent during the rejoin with the member token it replaces", h.bearer, token)
	}
	return h
}

// regrantedAfter answers the second carry-over's rejoin j, then grants
// both partitions back at epoch 3 on the heartbeat that follows
// (regrantedOn).
func regrantedAfter(t *testing.T, c *scriptedCoordinator, m *member, j *coordinatorCall, done <-chan struct{}) {
	t.Helper()
	j.reply(t, api.JoinResponse{MemberID: "cg-1", MemberToken: "member-token-3"})
	<-done
	regrantedOn(t, c, m, nextBeat(t, c, "member-token-3"))
}

// regrantedOn grants both partitions back at epoch 3 on heartbeat h: the
// client kept them throughout, the session fetches them at 3, nothing is
// held.
func regrantedOn(t *testing.T, c *scriptedCoordinator, m *member, h *coordinatorCall) {
	t.Helper()
	h.reply(t, grants(3, refenceP0, refenceP1))
	c.next(t, "heartbeat")
	clientKeeps(t, m, "after the regrant")
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range []session.Partition{refenceP0, refenceP1} {
		if info, _ := m.sess.Inspect(p); info.State != session.Fetching || info.Epoch != 3 {
			t.Errorf("%v: %v at epoch %d, want fetching at 3", p, info.State, info.Epoch)
		}
	}
	if len(m.deferred) != 0 {
		t.Errorf("revokes still held after the regrant: %v", m.deferred)
	}
}

// carryOverTo carries the member over to credential (a re-authentication
// of its client) in the background, as the listener does; the channel
// closes when it is done.
func carryOverTo(m *member, credential string) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.carryOver(m.ctx, credential, "", time.Now().Add(time.Hour))
	}()
	return done
}

func fence(epoch uint64, ps ...session.Partition) api.HeartbeatResponse {
	var r api.HeartbeatResponse
	for _, p := range ps {
		r.Revoke = append(r.Revoke, api.PartitionRef{Topic: p.Topic, Partition: p.Partition, Epoch: epoch})
	}
	return r
}

func grants(epoch uint64, ps ...session.Partition) api.HeartbeatResponse {
	var r api.HeartbeatResponse
	for _, p := range ps {
		r.Grants = append(r.Grants, api.Grant{Topic: p.Topic, Partition: p.Partition, Epoch: epoch, Offset: 0,
			Capability: "capability", ExpiresAt: time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
	}
	return r
}

// clientKeeps fails unless a heartbeat of the client, owning what it was
// last assigned, would keep all of it.
func clientKeeps(t *testing.T, m *member, when string) {
	t.Helper()
	if gone := toldToGiveUp(t, m); len(gone) > 0 {
		t.Fatalf("%s the client was told to give up %v: a carry-over's fence reached it", when, gone)
	}
}

// toldToGiveUp answers a KIP-848 heartbeat of the client owning its last
// assignment and returns what the answer takes from it.
func toldToGiveUp(t *testing.T, m *member) []session.Partition {
	t.Helper()
	m.mu.Lock()
	epoch, owned := m.epoch, map[session.Partition]bool{}
	for _, p := range m.sent {
		owned[p] = true
	}
	m.mu.Unlock()
	_, assignment, code := m.heartbeat848(epoch, owned, time.Now())
	if code != 0 {
		t.Fatalf("the client's heartbeat was answered error %d", code)
	}
	var gone []session.Partition
	for p := range owned {
		if assignment != nil && !slices.Contains(assignment, p) {
			gone = append(gone, p)
		}
	}
	slices.SortFunc(gone, compareParts)
	return gone
}

// scriptedCoordinator is the coordinator's member API played by a test:
// each join and heartbeat waits for the test's answer; commits and leaves
// are answered at once, the commits' offsets kept (committed).
type scriptedCoordinator struct {
	calls chan *coordinatorCall
	done  chan struct{}

	mu       sync.Mutex
	commits  []api.CommitOffset
	releases []session.Partition // every partition a release (PartitionCommitted) named
	// renews: the coordinator takes renew_token (a carry-over renews the
	// member in place); else it refuses the field as one from before it.
	renews bool
	// leaves: leaves wait for the test's answer too (kind "leave").
	leaves bool
	// offsetsGone: the committed offsets read is answered unknown_member
	// (the member token's member left: a renewal's old one).
	offsetsGone bool
}

// committed is every offset committed so far, in order.
func (c *scriptedCoordinator) committed() []api.CommitOffset {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.commits)
}

// releasesOf is every partition a release named so far, in order.
func (c *scriptedCoordinator) releasesOf() []session.Partition {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.releases)
}

type coordinatorCall struct {
	kind   string // join, heartbeat (leave: scriptedCoordinator.leaves)
	bearer string
	body   []byte
	answer chan any
}

func (c *scriptedCoordinator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	kind := path.Base(r.URL.Path)
	w.Header().Set("Content-Type", "application/json")
	c.mu.Lock()
	scripted := kind == "join" || kind == "heartbeat" || kind == "leave" && c.leaves
	gone := kind == "offsets" && c.offsetsGone
	c.mu.Unlock()
	if gone {
		w.WriteHeader(http.StatusConflict)
		_, _ = io.WriteString(w, `{"error":{"code":"unknown_member","message":"unknown member: rejoin"}}`)
		return
	}
	if !scripted {
		var commit api.CommitRequest
		if kind == "commit" && json.Unmarshal(body, &commit) == nil {
			c.mu.Lock()
			c.commits = append(c.commits, commit.Offsets...)
			for _, o := range commit.Offsets {
				if commit.Release {
					c.releases = append(c.releases, session.Partition{Topic: o.Topic, Partition: o.Partition})
				}
			}
			c.mu.Unlock()
		}
		_, _ = io.WriteString(w, "{}")
		return
	}
	var join api.JoinRequest
	c.mu.Lock()
	renews := c.renews
	c.mu.Unlock()
	if kind == "join" && json.Unmarshal(body, &join) == nil && join.RenewToken != "" && !renews {
		// A coordinator from before renew_token: its strict decoding
		// refuses the field. These tests play the fencing rejoin.
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":{"code":"bad_request","message":"unknown field \"renew_token\""}}`)
		return
	}
	call := &coordinatorCall{kind: kind, bearer: strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), body: body, answer: make(chan any, 1)}
	select {
	case c.calls <- call:
	case <-c.done:
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	case <-r.Context().Done():
		return
	}
	select {
	case a := <-call.answer:
		if e, ok := a.(api.ErrorBody); ok {
			w.WriteHeader(e.Error.Code.Status())
		}
		_ = json.NewEncoder(w).Encode(a)
	case <-c.done:
		w.WriteHeader(http.StatusServiceUnavailable)
	case <-r.Context().Done():
	}
}

// next is the member's next join or heartbeat; it must be of kind.
func (c *scriptedCoordinator) next(t *testing.T, kind string) *coordinatorCall {
	t.Helper()
	select {
	case call := <-c.calls:
		if call.kind != kind {
			t.Fatalf("the member sent a %s (%s), want a %s", call.kind, call.body, kind)
		}
		return call
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s from the member within 10s", kind)
		return nil
	}
}

func (call *coordinatorCall) reply(t *testing.T, answer any) {
	t.Helper()
	if r, ok := answer.(api.HeartbeatResponse); ok {
		r.Revoke, r.Grants, r.Renew = nonNil(r.Revoke), nonNil(r.Grants), nonNil(r.Renew)
		answer = r
	}
	call.answer <- answer
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// TestCarryOverFencePausesTheClient: between a carry-over's fence and its
// regrant the partitions' capability is fenced. The client's fetches
// refused so are answered empty, throttled (its member's capability says
// paused), not NOT_LEADER_OR_FOLLOWER — on which KafkaJS rejoins and reads
// again from its committed offset — and its commit waits for the regrant
// and goes with the new capability, not the fenced one (refused
// stale_epoch, ILLEGAL_GENERATION to the client: KafkaJS rejoins). KafkaJS
// with 10 s IdP tokens read 3–4 records twice in 22 s, one rejoin a
// carry-over (TestKafkaJSRenewsIdPTokens). Once regranted nothing pauses.
func TestCarryOverFencePausesTheClient(t *testing.T) {
	c, m := startScriptedMember(t)
	h := carriedOver(t, c, m, refenceP0, refenceP1)
	if token, paused := m.capability(refenceP0); token == "" || !paused {
		t.Fatalf("while the carry-over's fence is pending the client's fetch is admitted with %q (paused %v), want the fenced capability, paused", token, paused)
	}
	committed := commitInBackground(m, refenceP0, 7)
	regrant := grants(2, refenceP0, refenceP1)
	for i := range regrant.Grants {
		regrant.Grants[i].Capability = "capability-2"
	}
	h.reply(t, regrant)
	if code := <-committed; code != "" {
		t.Fatalf("the commit made while the fence was pending was answered %q, want committed", code)
	}
	if got := c.committed(); len(got) != 1 || got[0].Capability != "capability-2" || got[0].Offset != 7 {
		t.Fatalf("the coordinator was sent %+v, want offset 7 with the regrant's capability", got)
	}
	if token, paused := m.capability(refenceP0); token != "capability-2" || paused {
		t.Errorf("after the regrant the client's fetch is admitted with %q (paused %v), want the new capability", token, paused)
	}
	clientKeeps(t, m, "after the regrant")
}
