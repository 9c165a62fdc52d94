package gateway

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
)

// syncServer plays the coordinator's side of GET /v1/sync for tests:
// tests push updates, each gets the next sequence number, polls are held
// until something newer than after exists, and every poll's after (the
// acknowledgement) is recorded in order.
type syncServer struct {
	srv   *httptest.Server
	token string

	mu       sync.Mutex
	seq      uint64
	deltas   []api.SyncResponse // deltas[i] has Seq i+1
	keys     []api.JWK
	settings *api.CoordinatorSettings // on every reset
	changed  chan struct{}            // closed when seq moves
	polls    []uint64                 // after of every poll received, in order
	polled   chan struct{}            // closed when a poll arrives
	failing  bool                     // answer 500 to every poll
	conflict bool                     // answer 409 conflict (another instance holds the id)
	onPoll   func(after uint64)
	leaves   []string             // gateway of every POST /v1/sync/leave
	onLeave  func(gateway string) // runs before a leave is answered
	// freezeLeaves: the next that many leaves are held unanswered until
	// their client gives up (a frozen leader), and not recorded.
	freezeLeaves int
}

func newSyncServer(t testing.TB, keys []api.JWK) *syncServer {
	s := &syncServer{token: "sync-secret-" + strconv.Itoa(int(time.Now().UnixNano()%1000)), keys: keys, settings: testSettings(),
		changed: make(chan struct{}), polled: make(chan struct{})}
	s.deltas = append(s.deltas, api.SyncResponse{Seq: 1, Keys: keys})
	s.seq = 1
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *syncServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v1/sync/leave" && r.Method == http.MethodPost && r.Header.Get("Authorization") == "Bearer "+s.token {
		s.mu.Lock()
		hook, freeze := s.onLeave, s.freezeLeaves > 0
		if freeze {
			s.freezeLeaves--
		}
		s.mu.Unlock()
		if freeze {
			<-r.Context().Done()
			return
		}
		if hook != nil {
			hook(r.URL.Query().Get("gateway"))
		}
		s.mu.Lock()
		s.leaves = append(s.leaves, r.URL.Query().Get("gateway"))
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("{}"))
		return
	}
	if r.URL.Path != "/v1/sync" || r.Header.Get("Authorization") != "Bearer "+s.token {
		http.Error(w, `{"error":{"code":"unauthorized","message":"sync token"}}`, http.StatusUnauthorized)
		return
	}
	after, err := strconv.ParseUint(r.URL.Query().Get("after"), 10, 64)
	waitMs, err2 := strconv.Atoi(r.URL.Query().Get("wait_ms"))
	if err != nil || err2 != nil || r.URL.Query().Get("gateway") == "" {
		http.Error(w, `{"error":{"code":"bad_request","message":"query"}}`, http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.polls = append(s.polls, after)
	close(s.polled)
	s.polled = make(chan struct{})
	failing, conflict, hook := s.failing, s.conflict, s.onPoll
	s.mu.Unlock()
	if hook != nil {
		hook(after)
	}
	if conflict {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusConflict)
		_, _ = w.Write([]byte(`{"error":{"code":"conflict","message":"gateway id gw-test is held by another instance"}}`))
		return
	}
	if failing {
		http.Error(w, `{"error":{"code":"unavailable","message":"test says no"}}`, http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(s.answer(r, after, time.Duration(waitMs)*time.Millisecond))
}

// answer holds the poll until seq passes after (or the wait ends).
func (s *syncServer) answer(r *http.Request, after uint64, wait time.Duration) api.SyncResponse {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		s.mu.Lock()
		if after == 0 || after > s.seq {
			defer s.mu.Unlock()
			return s.snapshotLocked()
		}
		if after < s.seq {
			defer s.mu.Unlock()
			return s.deltaLocked(after)
		}
		changed := s.changed
		s.mu.Unlock()
		select {
		case <-changed:
		case <-timer.C:
			return api.SyncResponse{Seq: after}
		case <-r.Context().Done():
			return api.SyncResponse{Seq: after}
		}
	}
}

func (s *syncServer) snapshotLocked() api.SyncResponse {
	out := s.deltaLocked(0)
	out.Reset, out.Keys, out.Settings = true, s.keys, s.settings
	return out
}

// deltaLocked merges the deltas after after (updates are idempotent).
func (s *syncServer) deltaLocked(after uint64) api.SyncResponse {
	out := api.SyncResponse{Seq: s.seq}
	for _, d := range s.deltas[after:] {
		if len(d.Keys) > 0 {
			out.Keys = s.keys
		}
		out.Fences = append(out.Fences, d.Fences...)
		out.Denied = append(out.Denied, d.Denied...)
		out.RevokedMembers = append(out.RevokedMembers, d.RevokedMembers...)
		out.QoS = append(out.QoS, d.QoS...)
	}
	return out
}

// push publishes u as the next update and returns its seq.
func (s *syncServer) push(u api.SyncResponse) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	u.Seq = s.seq
	if len(u.Keys) > 0 {
		s.keys = u.Keys
	}
	s.deltas = append(s.deltas, u)
	close(s.changed)
	s.changed = make(chan struct{})
	return s.seq
}

func (s *syncServer) currentSeq() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seq
}

// restart forgets every update (a coordinator that lost its log): the
// next poll gets a snapshot with only the keys, at seq 1.
func (s *syncServer) restart() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq = 1
	s.deltas = []api.SyncResponse{{Seq: 1, Keys: s.keys}}
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *syncServer) setFailing(on bool) {
	s.mu.Lock()
	s.failing = on
	s.mu.Unlock()
}

// setConflicting makes every poll a 409 conflict, as the coordinator
// answers a process whose gateway id another instance holds.
func (s *syncServer) setConflicting(on bool) {
	s.mu.Lock()
	s.conflict = on
	s.mu.Unlock()
}

func (s *syncServer) setOnPoll(f func(after uint64)) {
	s.mu.Lock()
	s.onPoll = f
	s.mu.Unlock()
}

// waitAck blocks until a poll with after ≥ seq arrived (the gateway
// acknowledged seq) or the deadline passes.
func (s *syncServer) waitAck(t testing.TB, seq uint64) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		s.mu.Lock()
		for _, a := range s.polls {
			if a >= seq {
				s.mu.Unlock()
				return
			}
		}
		polled := s.polled
		s.mu.Unlock()
		select {
		case <-polled:
		case <-deadline:
			t.Fatalf("gateway did not acknowledge seq %d; polls %v", seq, s.pollLog())
		}
	}
}

// waitPolls blocks until n polls arrived.
func (s *syncServer) waitPolls(t testing.TB, n int) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		s.mu.Lock()
		got, polled := len(s.polls), s.polled
		s.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-polled:
		case <-deadline:
			t.Fatalf("%d polls, want %d", got, n)
		}
	}
}

func (s *syncServer) leaveLog() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.leaves...)
}

func (s *syncServer) pollLog() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]uint64(nil), s.polls...)
}
