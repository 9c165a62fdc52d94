package ops_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/harness"
	"github.com/capgate/capgate/internal/stack"
)

// scrapeFamilies reads url's /metrics with Prometheus's own text parser.
func scrapeFamilies(t *testing.T, o *opsStack, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := o.s.HTTP().Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("%s/metrics: %v", url, err)
	}
	return families
}

func labelsOf(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

func histogramCount(f *dto.MetricFamily, label, value string) uint64 {
	var n uint64
	for _, m := range f.GetMetric() {
		if labelsOf(m)[label] == value {
			n += m.GetHistogram().GetSampleCount()
		}
	}
	return n
}

// TestMetricsLabelsDisagree is issue #13's metrics defect: "code" meant
// an API error code on the gateway and an HTTP status on the coordinator,
// the route label was "op" on one and "route" on the other, there was no
// build_info or process collector, fetch latency mixed in long polls and
// the coordinator had no per-group lag. After real traffic (a group whose
// partitions nobody committed, a refused request to each process, a
// short fetch and a long poll), both processes' /metrics, read with
// Prometheus's parser, speak one vocabulary.
func TestMetricsLabelsDisagree(t *testing.T) {
	t.Parallel()
	// Per-group lag series are opt-in (group names are the tenants' and
	// /metrics answers anyone): this operator opted in.
	o := startOpsWith(t, map[string]int32{"m": 2}, opsOptions{gateways: 1,
		coordinator: func(cfg *coordinator.Config) { cfg.GroupLagLabelsMax = 10 }})
	ctx := context.Background()
	for range 7 {
		if _, err := o.s.Broker.Produce(ctx, "m", 0, []*kgo.Record{{Value: []byte("x")}}); err != nil {
			t.Fatal(err)
		}
	}
	cred, err := o.s.ClientCredential(ctx, "m", []string{"lagging"}, []string{"m"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var join api.JoinResponse
	status, body, err := o.s.Admin(ctx, http.MethodGet, "/v1/admin/groups/none-such-route/x", nil, nil) // a refused admin call
	if err != nil || status != http.StatusNotFound {
		t.Fatalf("unknown route: %d %s %v", status, body, err)
	}
	if err := doJoin(ctx, o, cred, &join); err != nil {
		t.Fatal(err)
	}
	capability := join.Grants[0].Capability
	partition := join.Grants[0].Partition
	if a := fetch(t, o, "not-a-token", "m", 0, 0, false); a.status != http.StatusUnauthorized {
		t.Fatalf("bad token: %d", a.status)
	}
	gw := o.s.GatewayURLs()[0]
	before := scrapeFamilies(t, o, gw)
	if a := fetch(t, o, capability, "m", partition, 0, false); a.status != http.StatusOK {
		t.Fatalf("short fetch: %d %s", a.status, a.body)
	}
	longPoll(t, o, capability, partition)

	for _, url := range []string{o.s.CoordinatorURL(), gw} {
		families := scrapeFamilies(t, o, url)
		for _, name := range []string{"capgate_build_info", "process_resident_memory_bytes", "process_cpu_seconds_total", "go_goroutines"} {
			if families[name] == nil {
				t.Errorf("%s: no %s", url, name)
			}
		}
		if bi := families["capgate_build_info"]; bi != nil {
			l := labelsOf(bi.GetMetric()[0])
			if l["version"] == "" || l["commit"] == "" || l["goversion"] == "" {
				t.Errorf("%s: build_info labels %v", url, l)
			}
		}
		var requests *dto.MetricFamily
		for name, f := range families {
			if name == "capgate_coordinator_requests_total" || name == "capgate_gateway_requests_total" {
				requests = f
			}
		}
		if requests == nil {
			t.Fatalf("%s: no requests_total", url)
		}
		codes := append(api.Codes(), "ok", "other")
		refused := false
		for _, m := range requests.GetMetric() {
			l := labelsOf(m)
			if len(l) != 2 || l["route"] == "" || !slices.Contains(codes, l["code"]) {
				t.Fatalf("%s: %s{%v}: want exactly route and code (ok or an API error code)", url, requests.GetName(), l)
			}
			refused = refused || l["code"] != "ok" && m.GetCounter().GetValue() > 0
		}
		if !refused {
			t.Errorf("%s: the refused request is not counted under its API code", url)
		}
	}

	after := scrapeFamilies(t, o, gw)
	short := "capgate_gateway_request_duration_seconds"
	long := "capgate_gateway_long_poll_duration_seconds"
	if d := histogramCount(after[short], "route", "fetch_json") - histogramCount(before[short], "route", "fetch_json"); d != 1 {
		t.Errorf("short fetch histogram counted %d fetches, want the 1 short fetch (the long poll apart)", d)
	}
	if d := histogramCount(after[long], "route", "fetch_json") - histogramCount(before[long], "route", "fetch_json"); d != 1 {
		t.Errorf("long poll histogram counted %d, want the 1 long poll", d)
	}
	coordinatorFamilies := scrapeFamilies(t, o, o.s.CoordinatorURL())
	if histogramCount(coordinatorFamilies["capgate_coordinator_long_poll_duration_seconds"], "route", "sync") == 0 {
		t.Error("the gateway's sync polls are not in the coordinator's long-poll histogram")
	}
	// 8 records (7, and the one that woke the long poll), nothing
	// committed: lag counts from the log start (offsets are cached for a
	// second and a result for lagReuse, hence the wait).
	harness.Eventually(t, 20*time.Second, "the group lag gauge to count every record", func() (bool, string) {
		for _, m := range scrapeFamilies(t, o, o.s.CoordinatorURL())["capgate_coordinator_group_lag"].GetMetric() {
			if labelsOf(m)["group"] == "lagging" {
				return m.GetGauge().GetValue() == 8, fmt.Sprintf("lag %v, want 8", m.GetGauge().GetValue())
			}
		}
		return false, "no series for group lagging"
	})
}

// doJoin joins group "lagging" with cred for topic m.
func doJoin(ctx context.Context, o *opsStack, cred string, out *api.JoinResponse) error {
	status, body, err := stack.DoJSON(ctx, o.s.HTTP(), http.MethodPost, o.s.CoordinatorURL()+"/v1/groups/lagging/join", cred,
		api.JoinRequest{Topics: []string{"m"}, SessionTimeoutMs: 60_000}, out)
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("join: %d %s", status, body)
	}
	return err
}

// longPoll fetches past the log end with max_wait_ms and produces while
// it waits, so the fetch long-polls at the broker and then answers.
func longPoll(t *testing.T, o *opsStack, capability string, partition int32) {
	t.Helper()
	done := make(chan fetched, 1)
	go func() { done <- fetchQuery(t, o, capability, "m", partition, "offset=latest&max_wait_ms=20000", false) }()
	harness.Eventually(t, 10*time.Second, "the fetch to wait at the broker", func() (bool, string) {
		f := scrapeFamilies(t, o, o.s.GatewayURLs()[0])["capgate_gateway_inflight_fetches"]
		return f != nil && f.GetMetric()[0].GetGauge().GetValue() == 1, "not in flight yet"
	})
	if _, err := o.s.Broker.Produce(context.Background(), "m", partition, []*kgo.Record{{Value: []byte("wake")}}); err != nil {
		t.Fatal(err)
	}
	if a := <-done; a.status != http.StatusOK {
		t.Fatalf("long poll: %d %s", a.status, a.body)
	}
}
