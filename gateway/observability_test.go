package gateway

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/ocap"
)

// TestPerCapabilityDebugLog: debug lines appear for exactly the
// capabilities whose QoS (claim or live override) asks for them, on a
// gateway logging at info; tokens never appear in logs.
func TestPerCapabilityDebugLog(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	h := newHarnessWith(t, harnessOptions{log: zap.New(core)})
	h.waitReady()
	h.produce(0, 1)
	claimed := capClaims(0)
	claimed.QoS = &ocap.QoS{LogLevel: "debug"}
	debugTok, debugClaims := h.mint(claimed)
	quiet := capClaims(0)
	quiet.Subject = "member-2"
	quietTok, quietClaims := h.mint(quiet)
	overridden := capClaims(0)
	overridden.Subject = "member-3"
	liveTok, liveClaims := h.mint(overridden)

	for _, tok := range []string{debugTok, quietTok, liveTok} {
		h.get(tok, recordsPath(0, "offset=0"))
	}
	seq := h.sync.push(api.SyncResponse{QoS: []api.QoSOverride{{ID: "dbg", Selector: api.QoSSelector{Holder: "member-3"}, LogLevel: "debug", Until: time.Now().Add(time.Hour).Unix()}}})
	h.sync.waitAck(t, seq)
	h.get(liveTok, recordsPath(0, "offset=1"))

	lines := map[string]int{}
	for _, e := range logs.All() {
		for _, tok := range []string{debugTok, quietTok, liveTok} {
			if strings.Contains(e.Message, tok) || strings.Contains(fmt.Sprint(e.ContextMap()), tok) {
				t.Fatalf("a token was logged: %v", e)
			}
		}
		if e.Level == zapcore.DebugLevel {
			jti, _ := e.ContextMap()["jti"].(string)
			lines[jti]++
		}
	}
	if lines[debugClaims.ID] != 1 || lines[quietClaims.ID] != 0 || lines[liveClaims.ID] != 1 {
		t.Fatalf("debug lines per jti: claim %d, quiet %d, override %d; want 1, 0, 1", lines[debugClaims.ID], lines[quietClaims.ID], lines[liveClaims.ID])
	}
}

func TestMetricsAndBoundedMonitorLabels(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MonitorLabelsMax = 2 })
	h.produce(0, 1)
	var tokens []string
	for _, tag := range []string{"alpha", "beta", "gamma", "delta"} {
		c := capClaims(0)
		c.QoS = &ocap.QoS{Monitor: tag}
		tok, _ := h.mint(c)
		tokens = append(tokens, tok)
		if r := h.get(tok, recordsPath(0, "offset=0")); r.status != http.StatusOK {
			t.Fatalf("fetch: %d", r.status)
		}
	}
	h.get(tokens[0], recordsPath(0, "offset=0"))
	h.get("", recordsPath(0, "offset=0"))
	r := h.get("", "/metrics")
	if r.status != http.StatusOK {
		t.Fatalf("metrics %d", r.status)
	}
	text := string(r.body)
	for _, want := range []string{
		`capgate_gateway_monitor_requests_total{monitor="alpha"} 2`,
		`capgate_gateway_monitor_requests_total{monitor="beta"} 1`,
		`capgate_gateway_monitor_requests_total{monitor="other"} 2`,
		`capgate_gateway_requests_total{code="ok",route="fetch_json"} 5`,
		`capgate_gateway_requests_total{code="unauthorized",route="fetch_json"} 1`,
		`capgate_gateway_token_cache_hits_total 1`,
		`capgate_gateway_token_cache_misses_total 4`,
		`capgate_gateway_request_duration_seconds_bucket{route="fetch_json"`,
		`capgate_gateway_sync_seconds_since_success`,
		`capgate_gateway_sync_seq_behind`,
		`capgate_gateway_out_of_sync 0`,
		`capgate_gateway_fetches_cancelled_total 0`,
		`capgate_gateway_fetch_bytes_total`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if strings.Contains(text, "gamma") || strings.Contains(text, "delta") {
		t.Error("monitor tags beyond monitor_labels_max became labels")
	}
	for _, tok := range tokens {
		if strings.Contains(text, tok) {
			t.Fatal("a token in the metrics")
		}
	}
}
