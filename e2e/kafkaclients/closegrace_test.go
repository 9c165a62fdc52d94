package kafkaclients

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/e2e/sdk"
	"github.com/capgate/capgate/gateway"
)

// lateCoordinator is a proxy in front of the coordinator that, once late
// is set, answers the members' calls and the gateway's sync leave late —
// each is passed on only after delay, or dropped when its caller gives
// up first — as an overloaded coordinator does; sync polls pass.
type lateCoordinator struct {
	delay   time.Duration
	late    atomic.Bool
	members atomic.Int64 // member calls held
	leaves  atomic.Int64 // sync leaves held
	// memberHeld is closed when the first member call is held.
	memberHeld chan struct{}
}

func (l *lateCoordinator) proxy(t testing.TB, coordinator string) string {
	return coordinatorProxy(t, coordinator, func(_ http.ResponseWriter, r *http.Request) bool {
		member, leave := memberCalls.MatchString(r.URL.Path), r.URL.Path == "/v1/sync/leave"
		if !l.late.Load() || !(member || leave) {
			return false
		}
		if !member {
			l.leaves.Add(1)
		} else if l.members.Add(1) == 1 {
			close(l.memberHeld)
		}
		late := time.NewTimer(l.delay)
		defer late.Stop()
		select {
		case <-late.C:
			return false // passed on, late
		case <-r.Context().Done():
			return true // its caller gave up
		}
	})
}

// TestGatewayCloseWithinGraceWhileBothSidesBusy: Close ends within
// shutdown_timeout counted from its call, however busy both of its sides
// are — an orchestrator kills the gateway at its grace period. Here the
// HTTP side has a long-poll fetch and a produce in flight (Kafka holds
// the produce), the Kafka listener runs a group member, and the
// coordinator answers member calls and the sync leave late (3 s, past
// the 2 s grace). The long poll is answered 503 at once, the produce
// with Kafka's answer once Kafka gives it; the HTTP listener stops
// accepting at once; Close returns at the grace.
// Before, Close ran the listener's close (its members given the whole
// grace; the HTTP listener accepting meanwhile), then the HTTP shutdown,
// then the leave (the whole grace again) one after another: about 4 s.
func TestGatewayCloseWithinGraceWhileBothSidesBusy(t *testing.T) {
	// margin: room for a loaded machine, below the 2 s more that Close's
	// phases one after another took (about 4 s).
	const grace, margin = 2 * time.Second, time.Second
	lc := &lateCoordinator{delay: 3 * time.Second, memberHeld: make(chan struct{})}
	s, _ := memberBehindProxy(t, grace, lc.proxy)
	gw := s.Gateways()[0].InProcess()

	// HTTP: a long poll on the empty partition 1, seen waiting at Kafka.
	polling := make(chan struct{})
	var pollSeen atomic.Bool
	cluster := s.Kafka.Cluster()
	cluster.ControlKey(int16(kmsg.Fetch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		if req := kreq.(*kmsg.FetchRequest); req.MaxWaitMillis >= 20_000 && pollSeen.CompareAndSwap(false, true) {
			close(polling)
		}
		return nil, nil, false
	})
	fetch := s.Grant(t, "orders", 1, []string{"fetch"}, time.Minute)
	polled := make(chan httpAnswer, 1)
	go func() {
		polled <- httpCall(http.MethodGet, gw.URL()+"/v1/topics/orders/partitions/1/records?offset=0&max_wait_ms=25000", fetch.Capability, "")
	}()
	// HTTP: a produce to partition 0, held by Kafka.
	held, release, _ := holdFirstProduce(s)
	releaseProduce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseProduce) // before the stack's cleanup, also when the test fails early
	produce := s.Grant(t, "orders", 0, []string{"produce"}, time.Minute)
	produced := make(chan httpAnswer, 1)
	go func() {
		produced <- httpCall(http.MethodPost, gw.URL()+"/v1/topics/orders/partitions/0/records", produce.Capability, `{"records":[{"value":"eA=="}]}`)
	}()
	for _, in := range []struct {
		what string
		ch   chan struct{}
	}{{"the long poll", polling}, {"the produce", held}} {
		select {
		case <-in.ch:
		case <-time.After(20 * time.Second):
			t.Fatalf("%s did not reach Kafka", in.what)
		}
	}

	lc.late.Store(true)
	start := time.Now()
	closed := make(chan error, 1)
	go func() { closed <- gw.Close() }()
	// Both sides stop accepting at once: the HTTP listener does not wait
	// for the Kafka listener's members to leave.
	sdk.Eventually(t, grace/2, "the HTTP listener refusing connections", func() (bool, string) {
		c, err := net.DialTimeout("tcp", gw.Addr(), time.Second)
		if err != nil {
			return true, ""
		}
		c.Close()
		return false, fmt.Sprintf("accepted %v after Close began", time.Since(start))
	})
	// Kafka answers the produce once the listener's member is leaving.
	go func() {
		select {
		case <-lc.memberHeld:
		case <-time.After(20 * time.Second):
		}
		releaseProduce()
	}()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("gateway Close did not return within 30 s")
	}
	took := time.Since(start)
	t.Logf("Close took %v (member calls held %d, sync leaves held %d)", took, lc.members.Load(), lc.leaves.Load())
	if a := <-polled; a.status != http.StatusServiceUnavailable || a.code != api.CodeUnavailable {
		t.Errorf("the long poll in flight: %d %s %q, want 503 %s (shutting down)", a.status, a.code, a.body, api.CodeUnavailable)
	} else if after := a.at.Sub(start); after > grace/2 {
		t.Errorf("the long poll in flight was answered %v after Close began, want at once", after)
	}
	if a := <-produced; a.status != http.StatusOK {
		t.Errorf("the produce in flight: %d %q, want Kafka's answer (200)", a.status, a.body)
	}
	if lc.members.Load() == 0 {
		t.Error("the listener's member never called the coordinator while closing")
	}
	if lc.leaves.Load() == 0 { // the members' share of the grace left room for it
		t.Error("the gateway never tried to leave the coordinator within its grace")
	}
	if took > grace+margin {
		t.Fatalf("gateway Close took %v, want within its shutdown_timeout (%v, +%v): member calls held %d, sync leaves held %d", took, grace, margin, lc.members.Load(), lc.leaves.Load())
	}
}

// httpAnswer is an HTTP answer as the tests here read it.
type httpAnswer struct {
	status int
	code   api.Code
	body   string
	at     time.Time // when the answer arrived
}

// httpCall sends one request with a bearer token.
func httpCall(method, url, token, body string) httpAnswer {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return httpAnswer{body: err.Error()}
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return httpAnswer{body: err.Error()}
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var e api.ErrorBody
	_ = json.Unmarshal(raw, &e)
	return httpAnswer{status: resp.StatusCode, code: e.Error.Code, body: string(raw), at: time.Now()}
}

// memberBehindProxy starts a stack with 2 partitions whose gateway has
// shutdown_timeout grace, request_timeout 10 s and reaches the
// coordinator through proxy, and a KIP-848 kgo member of group a-orders
// (tenant-a's credential, returned) that polled 3 records of partition 0.
func memberBehindProxy(t *testing.T, grace time.Duration, proxy func(testing.TB, string) string) (*Stack, string) {
	t.Helper()
	s := Start(t, Options{Partitions: 2, Gateway: func(cfg *gateway.Config) {
		cfg.CoordinatorURL = proxy(t, cfg.CoordinatorURL)
		cfg.ShutdownTimeout = grace
		cfg.Broker.RequestTimeout = 10 * time.Second
	}})
	cred := tenantCredential(t, s, "tenant-a", []string{"a-*"})
	m := joinGroup(t, s, "a1", "a-orders", cred, kip848)
	produceDirect(t, s, "orders", 0, 3)
	sdk.Eventually(t, 20*time.Second, "a1 polled 3 records", func() (bool, string) {
		return len(m.Records()) == 3, fmt.Sprintf("%d polled", len(m.Records()))
	})
	return s, cred
}
