package kafkaproto

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/ocap"
)

// clientGate is refuseGate whose client credentials are good.
type clientGate struct{ refuseGate }

func (clientGate) CheckClient(*ocap.Claims, time.Time) api.Code { return "" }

// anyClient authenticates every token as a client credential for every
// group and topic.
type anyClient struct{}

func (anyClient) Authenticate(token string, _ netip.Addr, now time.Time) (*Principal, error) {
	claims := &ocap.Claims{Subject: "svc", Groups: []string{"*"}, Topics: []string{"*"}, ExpiresAt: ocap.Seconds(now.Add(time.Hour).Unix())}
	return &Principal{Claims: claims, Token: token, Expires: now.Add(time.Hour)}, nil
}

// joinLog is what a failingJoins coordinator saw.
type joinLog struct {
	joins       atomic.Int64
	first, last atomic.Int64 // unix nanoseconds
	seen        chan struct{}
}

// span is the time between the first join and the last.
func (l *joinLog) span() time.Duration { return time.Duration(l.last.Load() - l.first.Load()) }

// failingJoins is a coordinator whose every join fails as the real one's
// does when it cannot mint (500 internal, retriable): it logs the joins
// and reports each on seen. The listener's tests run without a
// coordinator (see listener_test.go); the real one answers this only
// with its minter broken from inside its own package.
func failingJoins(t *testing.T) (string, *joinLog) {
	l := &joinLog{seen: make(chan struct{}, 1)}
	coordinator := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/join") {
			now := time.Now().UnixNano()
			l.first.CompareAndSwap(0, now)
			l.last.Store(now)
			l.joins.Add(1)
			select {
			case l.seen <- struct{}{}:
			default:
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		w.Write([]byte(`{"error":{"code":"internal","message":"mint grants"}}`))
	}))
	t.Cleanup(coordinator.Close)
	return coordinator.URL, l
}

// joinRequests are a first join of each group protocol.
func joinRequests() map[string]kmsg.Request {
	kip848 := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	kip848.Group, kip848.MemberEpoch, kip848.RebalanceTimeoutMillis = "g", 0, 5000
	kip848.SubscribedTopicNames = []string{"orders"}
	classic := kmsg.NewPtrJoinGroupRequest()
	classic.SetVersion(5)
	classic.Group, classic.ProtocolType = "g", "consumer"
	classic.SessionTimeoutMillis, classic.RebalanceTimeoutMillis = 1000, 5000
	meta := kmsg.ConsumerMemberMetadata{Topics: []string{"orders"}}
	classic.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: meta.AppendTo(nil)}}
	return map[string]kmsg.Request{"kip848": kip848, "classic": classic}
}

// joinErrorCode is a join answer's error code.
func joinErrorCode(resp kmsg.Response) int16 {
	switch r := resp.(type) {
	case *kmsg.ConsumerGroupHeartbeatResponse:
		return r.ErrorCode
	case *kmsg.JoinGroupResponse:
		return r.ErrorCode
	}
	return -2
}

// startGroupListener starts a listener with cfg whose clients all hold a
// good client credential; it is closed when t ends (closeWithin).
func startGroupListener(t *testing.T, cfg Config) *Server {
	t.Helper()
	s, err := New(cfg, clientGate{}, anyClient{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeWithin(t, s, 10*time.Second) })
	return s
}

// closeWithin closes s and fails t unless Close returns within d (a hung
// Close is left behind: the test fails rather than the binary hanging).
func closeWithin(t *testing.T, s *Server, d time.Duration) {
	t.Helper()
	closed := make(chan struct{})
	go func() {
		s.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(d):
		t.Fatalf("Close did not return within %s", d)
	}
}

// TestJoinThatCannotCompleteEnds: while the coordinator answers every
// join 500 (retriable), a Kafka client's first join is retried with
// backoff and ends at request_timeout with COORDINATOR_NOT_AVAILABLE —
// also when that is later than the member's session timeout, which
// used to close the joining member: the driver stopped without ending
// the join, so the client was never answered and Close hung in start
// for good. A join in flight when the gateway closes ends at once and
// Close returns. Both group protocols; the classic client asks for a
// 1 s session timeout, the KIP-848 members get kafka_member_session_timeout 1 s.
func TestJoinThatCannotCompleteEnds(t *testing.T) {
	for name, join := range joinRequests() {
		t.Run(name, func(t *testing.T) {
			url, coord := failingJoins(t)
			cfg := testConfig()
			cfg.CoordinatorURL, cfg.RequestTimeout, cfg.MemberSessionTimeout = url, 3*time.Second, time.Second
			s := startGroupListener(t, cfg)
			r := dialAuthenticated(t, s, "credential")
			resp, err := r.roundTrip(join) // answered within 5 s or an error
			if err != nil {
				closeWithin(t, s, 10*time.Second)
				t.Fatalf("a join the coordinator refuses 500 past the member session timeout: not answered (%v; %d joins sent)", err, coord.joins.Load())
			}
			if code := joinErrorCode(resp); code != kerr.CoordinatorNotAvailable.Code {
				t.Fatalf("a join the coordinator refuses 500: error %d, want COORDINATOR_NOT_AVAILABLE (%d)", code, kerr.CoordinatorNotAvailable.Code)
			}
			// request_timeout 3 s: retries 25-50 ms apart, doubling up to
			// 1 s, so one is sent after the first second at the latest
			// 1.55 s in; a join ended at the member session timeout sends
			// none after 1 s.
			if n := coord.joins.Load(); n < 2 || n > 20 {
				t.Fatalf("%d joins sent in request_timeout, want retries with backoff (2..20)", n)
			}
			if span := coord.span(); span < cfg.MemberSessionTimeout {
				t.Fatalf("joins retried for %s, want them retried past the member session timeout (%s) up to request_timeout (%s)",
					span, cfg.MemberSessionTimeout, cfg.RequestTimeout)
			}
			for len(coord.seen) > 0 {
				<-coord.seen
			}
			inFlight := make(chan error, 1)
			go func() {
				_, err := r.roundTrip(join)
				inFlight <- err
			}()
			<-coord.seen // the join is at the coordinator when the gateway closes
			closeWithin(t, s, 10*time.Second)
			if err := <-inFlight; err == nil || isTimeout(err) {
				t.Fatalf("a join in flight when the gateway closed: %v, want its connection closed", err)
			}
		})
	}
}

// heldJoins is a coordinator that never answers a join: it reports each
// on held and, once the gateway gave the join up (its request's context
// ended), on cancelled.
func heldJoins(t *testing.T) (url string, held, cancelled chan struct{}) {
	held, cancelled = make(chan struct{}, 16), make(chan struct{}, 16)
	ended := make(chan struct{})
	coordinator := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // read whole: only then does a hang-up end r's context
		held <- struct{}{}
		select {
		case <-r.Context().Done():
			cancelled <- struct{}{}
		case <-ended: // the test is over: Close waits for its handlers
		}
	}))
	t.Cleanup(func() {
		close(ended)
		coordinator.Close()
	})
	return coordinator.URL, held, cancelled
}

// TestJoinEndsWhenTheClientHangsUp: a client that hangs up while its
// first join waits for the coordinator (here one that never answers,
// request_timeout a minute) ends the join at once — the connection
// reads its socket while the join runs (watchHangUp) — instead of the
// gateway joining for nobody for up to request_timeout. Both group
// protocols.
func TestJoinEndsWhenTheClientHangsUp(t *testing.T) {
	for name, join := range joinRequests() {
		t.Run(name, func(t *testing.T) {
			url, held, cancelled := heldJoins(t)
			cfg := testConfig()
			cfg.CoordinatorURL, cfg.RequestTimeout = url, time.Minute
			s := startGroupListener(t, cfg)
			r := dialAuthenticated(t, s, "credential")
			if err := r.send(join); err != nil {
				t.Fatal(err)
			}
			<-held
			r.nc.Close()
			select {
			case <-cancelled:
			case <-time.After(10 * time.Second):
				closeWithin(t, s, 10*time.Second)
				t.Fatal("the join went on for 10 s after its client hung up (request_timeout a minute)")
			}
			closeWithin(t, s, 10*time.Second)
		})
	}
}

// TestJoinKeepsAPipelinedRequest: a request the client sends while its
// join runs (read by the hang-up watch) is answered after the join, in
// order: the join COORDINATOR_NOT_AVAILABLE at request_timeout, then
// ApiVersions.
func TestJoinKeepsAPipelinedRequest(t *testing.T) {
	for name, join := range joinRequests() {
		t.Run(name, func(t *testing.T) {
			url, _ := failingJoins(t)
			cfg := testConfig()
			cfg.CoordinatorURL, cfg.RequestTimeout = url, time.Second
			s := startGroupListener(t, cfg)
			r := dialAuthenticated(t, s, "credential")
			versions := kmsg.NewPtrApiVersionsRequest()
			if err := r.send(join); err != nil {
				t.Fatal(err)
			}
			if err := r.send(versions); err != nil {
				t.Fatal(err)
			}
			resp, err := r.receive(join)
			if err != nil || joinErrorCode(resp) != kerr.CoordinatorNotAvailable.Code {
				t.Fatalf("the join: %v %+v, want COORDINATOR_NOT_AVAILABLE", err, resp)
			}
			resp, err = r.receive(versions)
			if err != nil || resp.(*kmsg.ApiVersionsResponse).ErrorCode != 0 || len(resp.(*kmsg.ApiVersionsResponse).ApiKeys) == 0 {
				t.Fatalf("ApiVersions sent while the join ran: %v %+v, want it answered", err, resp)
			}
		})
	}
}
