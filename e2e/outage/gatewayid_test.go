package outage

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/harness"
	"github.com/capgate/capgate/gateway"
	"github.com/capgate/capgate/internal/stack"
)

// idStack is a coordinator and kfake with no gateway yet, each gateway
// it adds configured with ids[i] ("" leaves gateway.id unset); a
// gateway_timeout of a minute, so silence decides nothing here.
func idStack(t *testing.T, ids ...string) *stack.Stack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := stack.Start(ctx, stack.Options{Dir: t.TempDir(), Topics: map[string]int32{topic: 1}, Timing: leaveTiming(),
		Gateway: func(i int, cfg *gateway.Config) {
			cfg.ID = ids[i]
			if cfg.ID == "" {
				cfg.ID = gateway.DefaultConfig().ID
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func addGateway(t *testing.T, s *stack.Stack, coordinatorURL string) *stack.Gateway {
	t.Helper()
	g, err := s.NewGateway()
	if err != nil {
		t.Fatal(err)
	}
	if coordinatorURL != "" {
		g.SetCoordinatorURL(coordinatorURL)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := g.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return g
}

func waitReady(t *testing.T, g *stack.Gateway, within time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if err := g.WaitReady(ctx); err != nil {
		t.Fatalf("%s not ready within %s: %v", g.ID, within, err)
	}
}

// readyz is a gateway's /readyz status and body.
func readyz(t *testing.T, s *stack.Stack, g *stack.Gateway) (int, string) {
	t.Helper()
	resp, err := s.HTTP().Get(g.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, string(b)
}

func listedGateways(t *testing.T, s *stack.Stack) (map[string]uint64, uint64) {
	t.Helper()
	var out coordinator.GatewaysResponse
	if err := s.MustAdmin(context.Background(), http.MethodGet, "/v1/admin/gateways", nil, &out); err != nil {
		t.Fatal(err)
	}
	acked := map[string]uint64{}
	for _, g := range out.Gateways {
		acked[g.ID] = g.Acked
	}
	return acked, out.Seq
}

// syncPoll sends one sync poll as gateway id, instance, acknowledging
// after, as a gateway process would.
func syncPoll(t *testing.T, s *stack.Stack, id, instance string, after uint64) (int, api.ErrorBody) {
	t.Helper()
	q := url.Values{"gateway": {id}, "instance": {instance}, "after": {fmt.Sprint(after)}, "wait_ms": {"0"}}
	req, _ := http.NewRequest(http.MethodGet, s.CoordinatorURL()+"/v1/sync?"+q.Encode(), nil)
	req.Header.Set("Authorization", "Bearer "+s.SyncToken)
	resp, err := s.HTTP().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e api.ErrorBody
	_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&e)
	return resp.StatusCode, e
}

// TestDuplicateGatewayIDRefused: two gateway processes configured with
// one gateway.id (newuser2 #0b). The first holds the id and stays ready;
// the second's polls are refused 409 conflict naming the id, and it
// reports not ready naming the reason. While the first is cut off from
// the coordinator (a revocation it has not applied), polls of a second
// instance acknowledging that revocation count for nothing: the id's
// acknowledged seq stays below it. Once the first is reachable again it
// acknowledges the revocation itself.
func TestDuplicateGatewayIDRefused(t *testing.T) {
	s := idStack(t, "dup", "dup")
	cut, err := stack.StartProxy(strings.TrimPrefix(s.CoordinatorURL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer cut.Close()
	first := addGateway(t, s, cut.URL())
	waitReady(t, first, 20*time.Second)

	second := addGateway(t, s, "")
	harness.Eventually(t, 20*time.Second, "the second gateway refused and not ready", func() (bool, string) {
		status, body := readyz(t, s, second)
		return status == http.StatusServiceUnavailable && strings.Contains(body, `\"dup\"`) && strings.Contains(body, "gateway.id"), fmt.Sprint(status, body)
	})
	if status, body := readyz(t, s, first); status != http.StatusOK {
		t.Fatalf("first gateway /readyz %d %s, want 200", status, body)
	}
	if acked, _ := listedGateways(t, s); len(acked) != 1 {
		t.Fatalf("admin gateways %v, want the one id", acked)
	}

	cut.Blackhole()
	if err := s.MustAdmin(context.Background(), http.MethodPost, "/v1/admin/capabilities/ZHVwbGljYXRlLWdhdGV3YQ/revoke", map[string]any{}, nil); err != nil {
		t.Fatal(err)
	}
	_, seq := listedGateways(t, s)
	status, e := syncPoll(t, s, "dup", "second-process", seq)
	if status != http.StatusConflict || e.Error.Code != api.CodeConflict || !strings.Contains(e.Error.Message, `"dup"`) {
		t.Fatalf("a second instance's poll acknowledging %d: %d %+v, want 409 conflict naming the id", seq, status, e)
	}
	if acked, _ := listedGateways(t, s); acked["dup"] >= seq {
		t.Fatalf("dup acknowledged %d by another instance's poll while its holder has not applied revocation %d", acked["dup"], seq)
	}
	// The operator sees it: the id's record counts the refusals (the
	// second gateway's own polls and this one) and so does the metric.
	var listed coordinator.GatewaysResponse
	if err := s.MustAdmin(context.Background(), http.MethodGet, "/v1/admin/gateways", nil, &listed); err != nil {
		t.Fatal(err)
	}
	if len(listed.Gateways) != 1 || listed.Gateways[0].Conflicts < 2 || listed.Gateways[0].LastConflict == "" {
		t.Fatalf("admin gateways %+v, want dup with its conflicts counted", listed.Gateways)
	}
	if n := coordinatorCounter(t, s, "capgate_coordinator_gateway_id_conflicts_total"); n < 2 {
		t.Fatalf("capgate_coordinator_gateway_id_conflicts_total %v, want the refused polls counted", n)
	}
	if status, body := readyz(t, s, second); status != http.StatusServiceUnavailable {
		t.Fatalf("second gateway /readyz %d %s, want 503", status, body)
	}

	cut.Heal()
	harness.Eventually(t, 20*time.Second, "the first gateway acknowledges the revocation", func() (bool, string) {
		acked, _ := listedGateways(t, s)
		return acked["dup"] >= seq, fmt.Sprintf("dup acked %d of %d", acked["dup"], seq)
	})
	if status, body := readyz(t, s, first); status != http.StatusOK {
		t.Fatalf("first gateway /readyz %d %s after it acknowledged, want 200", status, body)
	}
}

// TestRestartedGatewayTakesItsIDAtOnce: a gateway that stopped cleanly
// (it left) and starts again as a new process — a new instance — holds
// its id again at once, long before gateway_timeout (a minute here).
func TestRestartedGatewayTakesItsIDAtOnce(t *testing.T) {
	s := idStack(t, "restarts")
	g := addGateway(t, s, "")
	waitReady(t, g, 20*time.Second)
	if err := g.Stop(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := g.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitReady(t, g, leaveTiming().GatewayTimeout/4)
	if acked, _ := listedGateways(t, s); len(acked) != 1 {
		t.Fatalf("admin gateways %v, want restarts only", acked)
	}
}

// TestDefaultGatewayIDsDiffer: two gateways on one host with no
// gateway.id configured, listening on different ports, get distinct ids
// (host name:port), both ready and both listed.
func TestDefaultGatewayIDsDiffer(t *testing.T) {
	s := idStack(t, "", "")
	a, b := addGateway(t, s, ""), addGateway(t, s, "")
	waitReady(t, a, 20*time.Second)
	waitReady(t, b, 20*time.Second)
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	acked, _ := listedGateways(t, s)
	for _, g := range []*stack.Gateway{a, b} {
		port := g.Addr[strings.LastIndexByte(g.Addr, ':')+1:]
		if _, ok := acked[host+":"+port]; !ok {
			t.Fatalf("admin gateways %v, want %s:%s listed", acked, host, port)
		}
	}
	if len(acked) != 2 {
		t.Fatalf("admin gateways %v, want two", acked)
	}
}

// coordinatorCounter reads one unlabelled sample of the coordinator's
// /metrics (0 when absent).
func coordinatorCounter(t *testing.T, s *stack.Stack, name string) float64 {
	t.Helper()
	resp, err := s.HTTP().Get(s.CoordinatorURL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return n
		}
	}
	return 0
}
