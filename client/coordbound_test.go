package client

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capgate/capgate/client/driver"
)

// heldServer holds every request until a token arrives on proceed, and
// counts the requests it holds and the connections it was opened.
type heldServer struct {
	*httptest.Server
	proceed        chan struct{}
	done           chan struct{} // closed at cleanup: every request ends
	held, mostHeld atomic.Int32
	conns          atomic.Int32
}

func newHeldServer(t *testing.T) *heldServer {
	s := &heldServer{proceed: make(chan struct{}), done: make(chan struct{})}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := s.held.Add(1)
		for m := s.mostHeld.Load(); n > m && !s.mostHeld.CompareAndSwap(m, n); m = s.mostHeld.Load() {
		}
		select {
		case <-s.proceed:
		case <-s.done:
		case <-r.Context().Done():
		}
		s.held.Add(-1)
		_, _ = w.Write([]byte(`{}`))
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	t.Cleanup(func() { close(s.done) })
	return s
}

// send sends n requests through hc to s at once, lets them through one
// at a time as s holds min(limit, those left), and waits for all.
func (s *heldServer) send(t *testing.T, hc *http.Client, n, limit int) {
	t.Helper()
	s.sendBy(t, func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/v1/groups/g/commit", strings.NewReader(`{}`))
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body) // as transport.do reads it: the connection is used again
		return resp.Body.Close()
	}, n, limit)
}

// sendBy is send with each request made by do.
func (s *heldServer) sendBy(t *testing.T, do func(context.Context) error, n, limit int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var failed atomic.Int32
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if do(ctx) != nil {
				failed.Add(1)
			}
		}()
	}
	for left := n; left > 0; left-- {
		for int(s.held.Load()) < min(limit, left) {
			if ctx.Err() != nil {
				t.Fatalf("%d requests held, want %d", s.held.Load(), min(limit, left))
			}
			time.Sleep(time.Millisecond) // polling the server's count
		}
		s.proceed <- struct{}{}
	}
	wg.Wait()
	if f := failed.Load(); f > 0 {
		t.Fatalf("%d requests failed", f)
	}
}

// TestCoordinatorRequestsAreBoundedPerReplica: a consumer's requests to
// a coordinator replica are at most CoordinatorConnectionsMax in flight
// (the others wait), over the default client — also in connections
// opened — and over a client of the user's (WithHTTPClient); requests
// to a host that is no coordinator (a gateway: with WithHTTPClient
// fetches go on the same client) are not counted. Before, nothing bounded them: a
// member's 2,000 commits at once took 441 connections at a new leader
// and had commits refused 503 overloaded.
func TestCoordinatorRequestsAreBoundedPerReplica(t *testing.T) {
	const limit, n = 8, 40
	for _, own := range []bool{true, false} {
		t.Run(fmt.Sprintf("default client %v", own), func(t *testing.T) {
			coord, other := newHeldServer(t), newHeldServer(t)
			cfg := validConfig()
			cfg.CoordinatorURL, cfg.CoordinatorURLs = coord.URL, nil
			cfg.Gateways = []string{other.URL}
			cfg.CoordinatorConnectionsMax = limit
			var opts []Option
			if !own {
				opts = append(opts, WithHTTPClient(&http.Client{}))
			}
			c, err := NewConsumer(cfg, opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer c.letGo()
			coord.send(t, c.tr.http, n, limit)
			if got := coord.mostHeld.Load(); got > limit {
				t.Errorf("%d requests in flight to the coordinator at once, want at most %d", got, limit)
			}
			if got := coord.conns.Load(); own && got > limit {
				t.Errorf("%d connections opened to the coordinator, want at most %d", got, limit)
			}
			if !own { // the default client carries coordinator calls only
				other.send(t, c.tr.http, n, n)
				if got := other.mostHeld.Load(); got != n {
					t.Errorf("%d requests in flight to another host at once, want all %d (not bounded)", got, n)
				}
			}
			t.Logf("coordinator: at most %d in flight, %d connections opened", coord.mostHeld.Load(), coord.conns.Load())
		})
	}
}

// TestGroupAPIRequestsAreBoundedPerReplica: the Kafka listener's
// members' calls (GroupAPI: here held heartbeats, as each member keeps
// one) to a coordinator replica are at most perReplica in flight and
// in connections opened; the others wait their turn and are answered.
// Before, GroupAPI had no bound: a gateway of more members than the
// coordinator's max_connections_per_address had the rest refused 503
// overloaded, its own sync polls (same address) with them.
func TestGroupAPIRequestsAreBoundedPerReplica(t *testing.T) {
	const limit, n = 8, 40
	coord := newHeldServer(t)
	a := NewGroupAPI(coord.URL, nil, limit)
	defer a.CloseIdleConnections()
	coord.sendBy(t, func(ctx context.Context) error {
		ans := a.Attempt(ctx, "g", "", driver.Send{Kind: driver.KindHeartbeat, Token: "member-token", Wait: 3 * time.Second})
		if ans.Failure != nil {
			return ans.Failure.Err
		}
		return nil
	}, n, limit)
	if got := coord.mostHeld.Load(); got > limit {
		t.Errorf("%d heartbeats in flight to the coordinator at once, want at most %d", got, limit)
	}
	if got := coord.conns.Load(); got > limit {
		t.Errorf("%d connections opened to the coordinator, want at most %d", got, limit)
	}
	t.Logf("coordinator: at most %d in flight, %d connections opened", coord.mostHeld.Load(), coord.conns.Load())
}
