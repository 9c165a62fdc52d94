package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/internal/stack"
)

// TestDeployReferencesOnlyExportedMetrics parses the alert rules with
// Prometheus's rule parser and every dashboard expression with its PromQL
// parser, and checks each metric they name against what running processes
// export after real traffic under default settings: a leading and a
// standby coordinator replica (state: kafka) and a gateway. A metric only
// a setting brings (optInMetrics) is checked against a single coordinator
// with that setting, and its rule or panel must name the setting.
func TestDeployReferencesOnlyExportedMetrics(t *testing.T) {
	replicas := scrapeReplicaSet(t)
	defaults := union(replicas.leader, replicas.standby, replicas.gateway)
	optIn := scrapeSingleCoordinator(t)
	p := parser.NewParser(parser.Options{})

	groups, errs := rulefmt.ParseFile("prometheus/alerts.yml", false, model.UTF8Validation, p, slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		t.Fatalf("alert rules: %v", errs)
	}
	rules := 0
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			rules++
			doc := r.Annotations["summary"] + " " + r.Annotations["description"]
			checkExpr(t, p, "rule "+r.Alert, r.Expr, doc, defaults, optIn)
		}
	}
	exprs := dashboardExprs(t, "grafana/capgate.json")
	for _, e := range exprs {
		checkExpr(t, p, "panel "+e.panel, e.expr, e.panel+" "+e.description, defaults, optIn)
	}
	if rules == 0 || len(exprs) == 0 {
		t.Fatalf("%d rules and %d panel expressions: nothing checked", rules, len(exprs))
	}
	t.Logf("%d alert rules and %d panel expressions checked against %d metrics exported under defaults", rules, len(exprs), len(defaults))
}

// TestDeployEveryReplicaExportsProcessMetrics: every coordinator replica,
// leading or standing by, exports the metrics of its process (build info,
// Go runtime, process, its TLS certificate's expiry) and its replica
// metrics, as README §Metrics says; the coordinator-level series are the
// leader's alone.
func TestDeployEveryReplicaExportsProcessMetrics(t *testing.T) {
	replicas := scrapeReplicaSet(t)
	everyReplica := []string{"capgate_build_info", "go_goroutines", "process_resident_memory_bytes",
		"capgate_coordinator_tls_certificate_expiry_timestamp_seconds",
		"capgate_coordinator_replica_leader", "capgate_coordinator_replica_unfit", "capgate_coordinator_replica_fenced_writes_total"}
	for role, names := range map[string]map[string]bool{"leader": replicas.leader, "standby": replicas.standby} {
		for _, n := range everyReplica {
			if !names[n] {
				t.Errorf("the %s replica does not export %s", role, n)
			}
		}
	}
	for _, n := range []string{"capgate_coordinator_requests_total", "capgate_coordinator_failed_closed", "capgate_coordinator_group_lag_rest"} {
		if !replicas.leader[n] || replicas.standby[n] {
			t.Errorf("%s: on the leader %v, on the standby %v; want the leader's alone", n, replicas.leader[n], replicas.standby[n])
		}
	}
}

// optInMetrics are the metrics no process exports under default
// settings, each with the setting that brings it: a rule or panel naming
// one must name the setting too.
var optInMetrics = map[string]string{
	"capgate_coordinator_group_lag": "group_lag_labels_max",
}

// A rule naming a metric nobody exports, and one that does not parse,
// are caught: the checks can fail.
func TestDeployCheckCatchesUnknownMetrics(t *testing.T) {
	p := parser.NewParser(parser.Options{})
	names, err := metricNames(p, `rate(capgate_gateway_fetches_total{op="fetch"}[5m]) / capgate_gateway_inflight_fetches`)
	if err != nil || !slices.Equal(names, []string{"capgate_gateway_fetches_total", "capgate_gateway_inflight_fetches"}) {
		t.Fatalf("names %v, %v", names, err)
	}
	bad := []byte("groups:\n  - name: x\n    rules:\n      - alert: Broken\n        expr: rate(capgate_gateway_requests_total[5m]\n")
	if _, errs := rulefmt.Parse(bad, false, model.UTF8Validation, p, slog.New(slog.DiscardHandler)); len(errs) == 0 {
		t.Fatal("a rule with an unbalanced parenthesis parsed")
	}
}

func checkExpr(t *testing.T, p parser.Parser, where, expr, doc string, defaults, optIn map[string]bool) {
	t.Helper()
	names, err := metricNames(p, expr)
	if err != nil {
		t.Errorf("%s: %q does not parse: %v", where, expr, err)
		return
	}
	for _, n := range names {
		setting := optInMetrics[n]
		switch {
		case defaults[n]:
		case setting == "" || !optIn[n]:
			t.Errorf("%s: %q names %s, which no coordinator replica (leading or standby) or gateway exports under defaults", where, expr, n)
		case !strings.Contains(doc, setting):
			t.Errorf("%s: %q names %s, which needs %s; its description does not say so", where, expr, n, setting)
		}
	}
}

// metricNames lists the metric names of expr's selectors, in order.
func metricNames(p parser.Parser, expr string) ([]string, error) {
	// Grafana's interval variables stand for a duration.
	expr = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h").Replace(expr)
	e, err := p.ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, matchers := range parser.ExtractSelectors(e) {
		for _, m := range matchers {
			if m.Name == labels.MetricName && m.Type == labels.MatchEqual && !slices.Contains(names, m.Value) {
				names = append(names, m.Value)
			}
		}
	}
	return names, nil
}

type panelExpr struct{ panel, description, expr string }

func dashboardExprs(t *testing.T, path string) []panelExpr {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Title       string `json:"title"`
			Description string `json:"description"`
			Targets     []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var out []panelExpr
	for _, p := range dash.Panels {
		for _, target := range p.Targets {
			out = append(out, panelExpr{p.Title, p.Description, target.Expr})
		}
	}
	return out
}

// scraped are the metric names of a replica set's processes.
type scraped struct{ leader, standby, gateway map[string]bool }

// scrapeReplicaSet starts kfake, two coordinator replicas (state: kafka)
// and a gateway under default settings, TLS on their listeners as in
// production, has an SDK consumer join, heartbeat, commit and fetch
// through them (so the labelled series exist: routes, group lag, sync
// lag), and returns every metric name the leader, the standby and the
// gateway export (histograms with their _bucket, _sum and _count series).
func scrapeReplicaSet(t *testing.T) scraped {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := startStack(ctx, t, stack.Options{Dir: t.TempDir(), Topics: map[string]int32{"orders": 2}, Gateways: 1, Coordinators: 2})
	consume(ctx, t, s)
	lead, err := s.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got scraped
	for _, co := range s.Coordinators() {
		names := scrape(t, s.HTTP(), co.URL+"/metrics")
		if co == lead {
			got.leader = names
		} else {
			got.standby = names
		}
	}
	got.gateway = scrape(t, s.HTTP(), s.GatewayURLs()[0]+"/metrics")
	return got
}

// scrapeSingleCoordinator runs one coordinator (badger) with the settings
// of optInMetrics (group_lag_labels_max), serves the same traffic and
// returns what it exports.
func scrapeSingleCoordinator(t *testing.T) map[string]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := startStack(ctx, t, stack.Options{Dir: t.TempDir(), Topics: map[string]int32{"orders": 2}, Gateways: 1,
		Coordinator: func(_ int, cfg *coordinator.Config) { cfg.GroupLagLabelsMax = 20 }})
	consume(ctx, t, s)
	return scrape(t, s.HTTP(), s.CoordinatorURL()+"/metrics")
}

// startStack starts opts with TLS on every listener (the certificate
// expiry gauges exist) and closes it when the test ends.
func startStack(ctx context.Context, t *testing.T, opts stack.Options) *stack.Stack {
	t.Helper()
	pki, err := stack.NewPKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := pki.Apply(&opts); err != nil {
		t.Fatal(err)
	}
	s, err := stack.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

func union(sets ...map[string]bool) map[string]bool {
	all := map[string]bool{}
	for _, set := range sets {
		for name := range set {
			all[name] = true
		}
	}
	return all
}

// consume produces a record and reads it with the SDK, which joins,
// fetches (a short fetch and a long poll), commits and leaves.
func consume(ctx context.Context, t *testing.T, s *stack.Stack) {
	t.Helper()
	cred, err := s.ClientCredential(ctx, "deploy", []string{"g"}, []string{"orders"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.NewConsumer(s.ClientConfig("g", []string{"orders"}, cred))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Close(ctx); err != nil {
			t.Error(err)
		}
	}()
	if err := c.Join(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := s.Broker.Produce(ctx, "orders", int32(i), []*kgo.Record{{Value: []byte("hello")}}); err != nil {
			t.Fatal(err)
		}
	}
	got := 0
	for got < 2 {
		recs, err := c.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got += len(recs)
	}
	// A long poll of an empty partition, and a refused fetch (a code).
	if err := c.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	fetch(ctx, t, s, "not-a-token", http.StatusUnauthorized)
}

// fetch sends one fetch with capability and checks its status.
func fetch(ctx context.Context, t *testing.T, s *stack.Stack, capability string, want int) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.GatewayURLs()[0]+"/v1/topics/orders/partitions/0/records?offset=0", nil)
	req.Header.Set("Authorization", "Bearer "+capability)
	resp, err := s.HTTP().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("fetch: %d %s, want %d", resp.StatusCode, body, want)
	}
}

// scrape reads url's Prometheus text exposition and returns its metric
// names: every "# TYPE" line's name, with _bucket/_sum/_count for
// histograms and _sum/_count for summaries.
func scrape(t *testing.T, hc *http.Client, url string) map[string]bool {
	t.Helper()
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %s", url, resp.StatusCode, body)
	}
	names := map[string]bool{}
	lines := bufio.NewScanner(bytes.NewReader(body))
	for lines.Scan() {
		var name, kind string
		if _, err := fmt.Sscanf(lines.Text(), "# TYPE %s %s", &name, &kind); err != nil {
			continue
		}
		names[name] = true
		switch kind {
		case "histogram":
			names[name+"_bucket"], names[name+"_sum"], names[name+"_count"] = true, true, true
		case "summary":
			names[name+"_sum"], names[name+"_count"] = true, true
		}
	}
	if len(names) == 0 {
		t.Fatalf("%s: no metrics in %.200s", url, body)
	}
	return names
}
