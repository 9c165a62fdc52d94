package coordinator

import (
	"bytes"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/group"
	"github.com/capgate/capgate/internal/buildinfo"
	"github.com/capgate/capgate/internal/scrape"
	"github.com/capgate/capgate/tlsconf"
)

// metrics are the coordinator's Prometheus metrics, on a registry of its
// own (several coordinators may live in one test process). The label
// vocabulary is the gateway's: route is the route's name, code is "ok"
// or the API error code of the answer (api.Codes; its HTTP status follows
// from the code), so one dashboard query fits both processes.
type metrics struct {
	registry       *prometheus.Registry
	requests       *prometheus.CounterVec
	latency        *prometheus.HistogramVec
	longPolls      *prometheus.HistogramVec
	heartbeatsHeld prometheus.Gauge
	grants         prometheus.Counter
	renewals       prometheus.Counter
	revokes        *prometheus.CounterVec
	handoff        prometheus.Histogram
	persist        prometheus.Histogram
	syncSeq        prometheus.Gauge
	auditFailures  prometheus.Counter
	failedClosed   prometheus.Gauge
	groupsReaped   *prometheus.CounterVec
	offsetsExpired prometheus.Counter
	joinLimits     *prometheus.CounterVec
	// gatewaysSafeByLag counts lagging episodes under silent_gateways:
	// fence (group/lag.go, sync_lag.go).
	gatewaysSafeByLag prometheus.Counter
	// gatewaysForgottenForLag counts gateways forgotten for lagging to
	// make room for a new id (group/lag.go forgetLaggingGateway).
	gatewaysForgottenForLag prometheus.Counter
	// gatewayIDConflicts counts sync polls and leaves refused because
	// another gateway process holds their id.
	gatewayIDConflicts prometheus.Counter
	scrape             *scrape.Answer // GET /metrics
}

func newMetrics(c *Coordinator) *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capgate_coordinator_requests_total", Help: "HTTP requests by route and outcome (ok or the API error code).",
		}, []string{"route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "capgate_coordinator_request_duration_seconds", Help: "Request latency by route, long polls (heartbeat, sync) apart.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 20),
		}, []string{"route"}),
		longPolls: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "capgate_coordinator_long_poll_duration_seconds", Help: "Held requests by route: heartbeats and gateway syncs, held until news or their wait.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, []string{"route"}),
		heartbeatsHeld: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "capgate_coordinator_heartbeats_held", Help: "Heartbeats waiting in the state machine for news.",
		}),
		grants: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "capgate_coordinator_grants_total", Help: "Partition grants handed out (joins, heartbeats, leases).",
		}),
		renewals: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "capgate_coordinator_renewals_total", Help: "Capability renewals handed out in heartbeats.",
		}),
		revokes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capgate_coordinator_revokes_total", Help: "Revocations: handoff (revoke sent to a member), admin (partition revoke answered), member (member revoked).",
		}, []string{"kind"}),
		handoff: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "capgate_coordinator_handoff_duration_seconds", Help: "From a partition's revoke reaching its holder to its grant reaching the next holder.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
		persist: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "capgate_coordinator_persist_duration_seconds", Help: "One synchronous store update per Ready.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
		syncSeq: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "capgate_coordinator_sync_seq", Help: "Highest sync sequence number handed out.",
		}),
		auditFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "capgate_coordinator_audit_failures_total", Help: "Readys the state machine's safety audit refused (nothing of them was persisted or sent).",
		}),
		failedClosed: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "capgate_coordinator_failed_closed", Help: "1 once the event loop stopped on a failed persist or safety audit: every request is refused until restart.",
		}),
		groupsReaped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capgate_coordinator_groups_reaped_total", Help: "Idle groups forgotten by the reaper, by the delay that applied: empty_group_ttl (no committed offsets) or offsets_retention (forgotten with its offsets).",
		}, []string{"reason"}),
		offsetsExpired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "capgate_coordinator_offsets_expired_total", Help: "Committed offsets forgotten with their groups after limits.offsets_retention.",
		}),
		joinLimits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capgate_coordinator_join_limit_refusals_total", Help: "Joins refused 409 limit_exceeded, by what was counted: groups, members_per_group, groups_per_credential (groups a tenant has live members in), groups_created (groups a tenant created that still exist, also groups_per_credential), members_per_credential (a tenant's live members over all its groups), state_bytes (also commits and leaves whose metadata would pass it), state_bytes_per_tenant (the same for the groups one tenant created).",
		}, []string{"limit"}),
		gatewaysSafeByLag: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "capgate_coordinator_gateways_safe_by_lag_total", Help: "Gateways counted safe by lag: polling, but without acknowledging a sync update appended more than gateway_timeout ago (silent_gateways: fence; once per episode, which ends when the gateway acknowledges everything that old).",
		}),
		gatewaysForgottenForLag: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "capgate_coordinator_gateways_forgotten_for_lag_total", Help: "Gateway ids forgotten to make room for a new one in a full table (groups.limits.gateways) after lagging longer than gateway_timeout (silent_gateways: fence); each holds every fence to gateway_timeout for gateway_timeout after.",
		}),
		gatewayIDConflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "capgate_coordinator_gateway_id_conflicts_total", Help: "Sync polls and leaves refused 409 conflict because another gateway process holds their gateway id (two gateways configured with one gateway.id; GET /v1/admin/gateways names it).",
		}),
	}
	for _, reason := range []string{reapEmpty, reapOffsets} {
		m.groupsReaped.WithLabelValues(reason)
	}
	m.registry.MustRegister(m.requests, m.latency, m.longPolls, m.heartbeatsHeld, m.grants, m.renewals, m.revokes, m.handoff, m.persist, m.syncSeq,
		m.auditFailures, m.failedClosed, m.groupsReaped, m.offsetsExpired, m.joinLimits, m.gatewaysSafeByLag, m.gatewaysForgottenForLag, m.gatewayIDConflicts,
		&syncLagCollector{c: c}, newGroupLagCollector(c), c.oauth)
	if !c.embedded { // a replica's leader: the replica exports these for its process, leading or not
		m.registry.MustRegister(processCollectors(c.tls)...)
	}
	m.scrape = scrape.New(func() prometheus.Gatherer { return m.registry })
	return m
}

// processCollectors are the metrics of the process rather than of its
// coordinator: the Go runtime, the process, capgate_build_info and, with
// TLS, the listener certificate's expiry. A single coordinator registers
// them with its own; a replica registers them once on its own registry
// (replica_metrics.go), so a standby exports them too and a leader does
// not export them twice.
func processCollectors(tls *tlsconf.Server) []prometheus.Collector {
	cs := []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildinfo.Collector()}
	if tls != nil {
		cs = append(cs, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "capgate_coordinator_tls_certificate_expiry_timestamp_seconds",
			Help: "When the listener's certificate expires (NotAfter, Unix seconds; reloaded files included): alert well before it (deploy/prometheus/alerts.yml)."},
			func() float64 { return float64(tls.NotAfter().Unix()) }))
	}
	return cs
}

// longPollRoutes are the routes whose requests are held (a heartbeat's
// wait_ms, a sync's wait_ms): their latency is the wait, measured apart.
var longPollRoutes = map[string]bool{"heartbeat": true, "sync": true}

// observe counts one answered request of route.
func (m *metrics) observe(route string, ctx *fasthttp.RequestCtx) {
	status, code := ctx.Response.StatusCode(), "ok"
	if status >= 400 && !ctx.Response.IsBodyStream() { // a stream's Body() would read it all
		code = outcomeCode(status, ctx.Response.Body())
	}
	m.requests.WithLabelValues(route, code).Inc()
	elapsed := time.Since(ctx.Time()).Seconds()
	if longPollRoutes[route] {
		m.longPolls.WithLabelValues(route).Observe(elapsed)
		return
	}
	m.latency.WithLabelValues(route).Observe(elapsed)
}

// outcomeCode is the code label of an answer: "ok" below 400, else the
// code of its JSON error body (api.EncodeError) when it is one of the
// table's, else "other" (the label stays bounded).
func outcomeCode(status int, body []byte) string {
	if status < 400 {
		return "ok"
	}
	const prefix = `{"error":{"code":"`
	if rest, ok := bytes.CutPrefix(body, []byte(prefix)); ok {
		if end := bytes.IndexByte(rest, '"'); end > 0 {
			if code := string(rest[:end]); tableCodes[code] {
				return code
			}
		}
	}
	return "other"
}

// tableCodes are the API error codes (api.Codes), the code label's
// values besides "ok" and "other".
var tableCodes = func() map[string]bool {
	set := map[string]bool{}
	for _, c := range api.Codes() {
		set[c] = true
	}
	return set
}()

// syncLagCollector reports, per gateway, how far its acknowledged sync
// sequence is behind the current one; it asks the event loop at scrape
// time.
type syncLagCollector struct {
	c *Coordinator
}

var syncLagDesc = prometheus.NewDesc("capgate_coordinator_sync_lag",
	"Sync sequence numbers a gateway has not acknowledged yet.", []string{"gateway"}, nil)

var gatewaySilentDesc = prometheus.NewDesc("capgate_coordinator_gateway_silent",
	"1 if the gateway has been silent longer than gateway_timeout.", []string{"gateway"}, nil)

func (s *syncLagCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- syncLagDesc
	ch <- gatewaySilentDesc
}

func (s *syncLagCollector) Collect(ch chan<- prometheus.Metric) {
	var gateways []group.GatewayDescription
	var seq uint64
	done := make(chan error, 1)
	go func() {
		done <- s.c.query(func(m *group.Machine) { gateways, seq = m.Gateways(), m.SyncSeq() })
	}()
	select {
	case err := <-done:
		if err != nil {
			return
		}
	case <-time.After(time.Second):
		return
	}
	for _, gw := range gateways {
		lag := float64(0)
		if seq > gw.Acked {
			lag = float64(seq - gw.Acked)
		}
		ch <- prometheus.MustNewConstMetric(syncLagDesc, prometheus.GaugeValue, lag, gw.ID)
		silent := float64(0)
		if gw.Silent {
			silent = 1
		}
		ch <- prometheus.MustNewConstMetric(gatewaySilentDesc, prometheus.GaugeValue, silent, gw.ID)
	}
}
