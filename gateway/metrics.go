package gateway

// Behavior: GET /metrics serves the gateway's Prometheus metrics in the
// text exposition format, from a registry of its own (several gateways may
// share a process): requests by route and outcome code ("ok" or the API
// error code: the coordinator's vocabulary too), latency histograms with
// the long polls (fetches that waited at the broker) apart, build, Go and
// process collectors,
// bytes and records out, token cache hits and misses, sync lag (sequence
// behind, seconds since the last good sync, self-fenced), in-flight
// fetches, those cancelled by revocations and the long polls abandoned by
// their clients, answer bytes held while clients read them, merged Kafka Fetches (requests, fetches carried, queued,
// fetched again alone, parts dropped unread), read-ahead (Kafka fetches
// made larger, fetches answered from what they read, chunks evicted,
// bytes held), and per-monitor-tag request
// and byte counts with at most monitor_labels_max distinct tags (then
// "other"). Unauthenticated, like /healthz.

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/internal/buildinfo"
	"github.com/capgate/capgate/internal/scrape"
)

// Request routes, the route label.
const (
	opFetchJSON = "fetch_json"
	opFetchRaw  = "fetch_raw"
	opProduce   = "produce"
	opHTTP      = "http" // refused before routing to an op
	codeOK      = "ok"
)

type metrics struct {
	registry    *prometheus.Registry
	scrape      *scrape.Answer // GET /metrics
	requests    *prometheus.CounterVec
	ops         map[string]*opMetrics // by op; read-only after init
	bytesOut    prometheus.Counter
	recordsOut  prometheus.Counter
	bytesIn     prometheus.Counter
	cacheHits   prometheus.Counter
	cacheMisses prometheus.Counter
	// authFailures counts tokens that failed verification (signature,
	// claims, kid); authThrottled those refused unchecked because their
	// address had spent its failures (failguard).
	authFailures  prometheus.Counter
	authThrottled prometheus.Counter
	abandoned     prometheus.Counter
	syncPolls     *prometheus.CounterVec
	appliedSeq    prometheus.Gauge
	monitors      *monitorLabels
}

// opMetrics are one op's series, found with one map lookup per request.
type opMetrics struct {
	ok       prometheus.Counter            // outcome ok
	outcomes map[string]prometheus.Counter // error code → counter
	latency  prometheus.Observer
	longPoll prometheus.Observer // nil for ops that do not long-poll
}

func newMetrics(g *Gateway) *metrics {
	m := &metrics{registry: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "capgate_gateway_requests_total", Help: "Requests by route and outcome (ok or the API error code)."}, []string{"route", "code"})
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "capgate_gateway_request_duration_seconds", Help: "Fetch and produce latency; fetches that long-polled at the broker are apart.",
		Buckets: prometheus.ExponentialBuckets(50e-6, 2, 20),
	}, []string{"route"})
	longPolls := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "capgate_gateway_long_poll_duration_seconds", Help: "Fetches that found nothing and waited at the broker (max_wait_ms), by route.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
	}, []string{"route"})
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	m.bytesOut = counter("capgate_gateway_fetch_bytes_total", "Response body bytes of successful fetches.")
	m.recordsOut = counter("capgate_gateway_fetch_records_total", "Records served in JSON fetches.")
	m.bytesIn = counter("capgate_gateway_produce_bytes_total", "Request body bytes of successful produces.")
	m.cacheHits = counter("capgate_gateway_token_cache_hits_total", "Capabilities found in the verified-token cache.")
	m.cacheMisses = counter("capgate_gateway_token_cache_misses_total", "Capabilities verified in full (signature).")
	m.authFailures = counter("capgate_gateway_auth_failures_total", "Capabilities and client credentials that failed verification (HTTP and Kafka listener).")
	m.authThrottled = counter("capgate_gateway_auth_throttled_total",
		"Tokens refused unchecked (429 rate_limited, a refused SASL) because their client address had spent its failed verifications (auth_failures_per_second, auth_failure_burst).")
	m.abandoned = counter("capgate_gateway_fetches_abandoned_total", "Long polls cancelled because their client hung up.")
	m.syncPolls = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "capgate_gateway_sync_polls_total", Help: "Sync polls by result."}, []string{"result"})
	m.appliedSeq = prometheus.NewGauge(prometheus.GaugeOpts{Name: "capgate_gateway_sync_applied_seq", Help: "Sequence number of the last sync update applied."})
	m.monitors = newMonitorLabels(g.cfg.MonitorLabelsMax)
	m.ops = map[string]*opMetrics{}
	for _, op := range []string{opFetchJSON, opFetchRaw, opProduce, opHTTP} {
		o := &opMetrics{ok: m.requests.WithLabelValues(op, codeOK), outcomes: map[string]prometheus.Counter{}, latency: latency.WithLabelValues(op)}
		for _, code := range knownCodes {
			o.outcomes[string(code)] = m.requests.WithLabelValues(op, string(code))
		}
		if op == opFetchJSON || op == opFetchRaw {
			o.longPoll = longPolls.WithLabelValues(op)
		}
		m.ops[op] = o
	}
	m.registry.MustRegister(m.requests, latency, longPolls, m.bytesOut, m.recordsOut, m.bytesIn, m.cacheHits, m.cacheMisses, m.authFailures, m.authThrottled, m.abandoned,
		m.syncPolls, m.appliedSeq, m.monitors.requests, m.monitors.bytes,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildinfo.Collector())
	m.registerGauges(g)
	m.registry.MustRegister(authHolderMetrics(g.authFailures)...)
	if g.tls != nil {
		m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "capgate_gateway_tls_certificate_expiry_timestamp_seconds",
			Help: "When the listeners' certificate (HTTP and Kafka) expires (NotAfter, Unix seconds; reloaded files included): alert well before it (deploy/prometheus/alerts.yml)."},
			func() float64 { return float64(g.tls.NotAfter().Unix()) }))
	}
	m.scrape = scrape.New(func() prometheus.Gatherer { return m.registry })
	return m
}

var knownCodes = []api.Code{
	api.CodeBadRequest, api.CodeUnauthorized, api.CodeTokenExpired, api.CodeForbidden, api.CodeNotFound,
	api.CodeMethodNotAllowed, api.CodeCapabilityRevoked, api.CodeBodyTooLarge, api.CodeOffsetOutOfRange,
	api.CodeRateLimited, api.CodeTooManyFetches, api.CodeOverloaded, api.CodeHeadersTooLarge, api.CodeBrokerError, api.CodeNotReady, api.CodeOutOfSync,
	api.CodeUnavailable, api.CodeInternal,
}

func (m *metrics) registerGauges(g *Gateway) {
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	m.registry.MustRegister(
		gauge("capgate_gateway_auth_failure_addresses", "Client addresses (IPv6: /64s) whose failed verifications the gateway tracks (at most 65,536).",
			func() float64 { return float64(g.authFailures.Len()) }),
		gauge("capgate_gateway_sync_acked_seq", "Sequence number last acknowledged to the coordinator.", func() float64 { return float64(g.ackedSeq.Load()) }),
		gauge("capgate_gateway_sync_seq_behind", "Updates applied but not yet acknowledged.", func() float64 {
			return float64(g.view.Seq()) - float64(g.ackedSeq.Load())
		}),
		gauge("capgate_gateway_sync_seconds_since_success", "Seconds since the last successful sync poll was sent (-1 before the first).", func() float64 {
			last := g.follower.LastGood()
			if last.IsZero() {
				return -1
			}
			return time.Since(last).Seconds()
		}),
		gauge("capgate_gateway_out_of_sync", "1 while fetches are refused for lack of a sync (not ready or self-fenced).", func() float64 {
			if g.syncRefusal(time.Now()) != "" {
				return 1
			}
			return 0
		}),
		gauge("capgate_gateway_inflight_fetches", "Fetches in flight.", func() float64 { return float64(g.inflight.count()) }),
		gauge("capgate_gateway_answer_bytes_held", "Bytes of fetch answers (16 KiB and more) held while their clients read them (max_answer_bytes_held).",
			func() float64 { return float64(g.held.held()) }),
		inflightRefused(g.inflight, hitGateway, "gateway"), inflightRefused(g.inflight, hitTenant, "tenant"), inflightRefused(g.inflight, hitHolder, "holder"),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "capgate_gateway_fetches_cancelled_total", Help: "In-flight fetches cancelled by a fence or revocation."},
			func() float64 { return float64(g.inflight.cancelled.Load()) }),
		counterOf("capgate_gateway_merged_fetch_requests_total", "Kafka Fetch requests that carried several fetches (merged: one request for several partitions of one broker).",
			g.broker.FetchMergeStats().Exchanges.Load),
		counterOf("capgate_gateway_merged_fetches_total", "Fetches carried by merged Kafka Fetch requests (their leaders included).",
			g.broker.FetchMergeStats().Parts.Load),
		counterOf("capgate_gateway_merge_queued_fetches_total", "Fetches that waited for an exchange in flight to their broker to end, to go merged.",
			g.broker.FetchMergeStats().Queued.Load),
		counterOf("capgate_gateway_merge_waits_out_total", "Queued fetches that stopped waiting after broker.merge_wait_max (a slow exchange in flight) and went on a connection of their own.",
			g.broker.FetchMergeStats().WaitedOut.Load),
		counterOf("capgate_gateway_merged_fetches_alone_total", "Merged fetches fetched again alone (the partition's next batch was larger than it asked for).",
			g.broker.FetchMergeStats().Alone.Load),
		counterOf("capgate_gateway_merged_parts_dropped_total", "Parts of merged answers released unread: their fetch had been cancelled (revoked, client gone).",
			g.broker.FetchMergeStats().Dropped.Load),
		counterOf("capgate_gateway_read_ahead_fills_total", "Small fetches in a row sent to Kafka larger (broker.read_ahead_bytes), to answer the next ones from.",
			g.broker.FetchAheadStats().Fills.Load),
		counterOf("capgate_gateway_read_ahead_hits_total", "Fetches answered from a read-ahead, without a Kafka exchange.",
			g.broker.FetchAheadStats().Hits.Load),
		counterOf("capgate_gateway_read_ahead_evicted_total", "Read-aheads dropped before their time to stay within broker.read_ahead_max_bytes.",
			g.broker.FetchAheadStats().Evicted.Load),
		gauge("capgate_gateway_read_ahead_bytes", "Bytes the read-aheads hold.", func() float64 { return float64(g.broker.FetchAheadStats().Held.Load()) }),
		gauge("capgate_gateway_token_cache_entries", "Entries in the verified-token cache.", func() float64 { return float64(g.cache.Len()) }),
		gauge("capgate_gateway_rate_limit_buckets", "Per-capability byte-rate buckets.", func() float64 { return float64(g.limiter.len()) }),
	)
}

// counterOf exports a count kept elsewhere (the broker client's merged
// fetches and read-ahead) as a counter.
func counterOf(name, help string, f func() int64) prometheus.Collector {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
		func() float64 { return float64(f()) })
}

// outcome counts one request of op with code ("" or codeOK for success)
// and its latency (none when elapsed is 0), as a long poll when it waited
// at the broker.
func (m *metrics) outcome(op string, code api.Code, elapsed time.Duration, longPoll bool) {
	o := m.ops[op]
	if o == nil { // the Kafka listener's ops: counted by label, never timed here
		label := string(code)
		if label == "" {
			label = codeOK
		}
		m.requests.WithLabelValues(op, label).Inc()
		return
	}
	if code == "" {
		o.ok.Inc()
	} else if c, ok := o.outcomes[string(code)]; ok {
		c.Inc()
	} else {
		m.requests.WithLabelValues(op, string(code)).Inc()
	}
	switch {
	case elapsed <= 0:
	case longPoll && o.longPoll != nil:
		o.longPoll.Observe(elapsed.Seconds())
	default:
		o.latency.Observe(elapsed.Seconds())
	}
}

// rejected counts a request refused before it reached an op.
func (m *metrics) rejected(code api.Code) { m.outcome(opHTTP, code, 0, false) }

// monitorLabels bounds the monitor tags used as label values: the first
// max distinct tags keep their name, later ones count as "other".
type monitorLabels struct {
	max      int
	requests *prometheus.CounterVec
	bytes    *prometheus.CounterVec

	mu     sync.RWMutex
	admits map[string]monitorCounters
	other  monitorCounters
}

type monitorCounters struct {
	requests, bytes prometheus.Counter
}

const monitorOther = "other"

func newMonitorLabels(maxTags int) *monitorLabels {
	l := &monitorLabels{
		max:      maxTags,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "capgate_gateway_monitor_requests_total", Help: "Requests by QoS monitor tag (bounded; then \"other\")."}, []string{"monitor"}),
		bytes:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "capgate_gateway_monitor_bytes_total", Help: "Bytes served or produced by QoS monitor tag (bounded; then \"other\")."}, []string{"monitor"}),
		admits:   map[string]monitorCounters{},
	}
	l.other = monitorCounters{l.requests.WithLabelValues(monitorOther), l.bytes.WithLabelValues(monitorOther)}
	return l
}

// observe counts one request of n bytes under tag ("" counts nothing).
func (l *monitorLabels) observe(tag string, n int) {
	if tag == "" {
		return
	}
	c := l.counters(tag)
	c.requests.Inc()
	c.bytes.Add(float64(n))
}

func (l *monitorLabels) counters(tag string) monitorCounters {
	l.mu.RLock()
	c, ok := l.admits[tag]
	full := len(l.admits) >= l.max
	l.mu.RUnlock()
	switch {
	case ok:
		return c
	case full:
		return l.other
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if c, ok := l.admits[tag]; ok {
		return c
	}
	if len(l.admits) >= l.max {
		return l.other
	}
	c = monitorCounters{l.requests.WithLabelValues(tag), l.bytes.WithLabelValues(tag)}
	l.admits[tag] = c
	return c
}

// handleMetrics serves GET /metrics.
func (g *Gateway) handleMetrics(ctx *fasthttp.RequestCtx) { g.metrics.scrape.Serve(ctx) }

// inflightRefused exports the fetches and produces (HTTP and Kafka
// listener) an in-flight cap refused: cap="gateway"
// (max_inflight_fetches), "tenant" (max_inflight_fetches_per_tenant) or
// "holder" (max_inflight_fetches_per_holder).
func inflightRefused(f *inflight, i capHit, name string) prometheus.Collector {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "capgate_gateway_inflight_refused_total",
		Help:        "Fetches and produces refused at an in-flight cap: the gateway's (max_inflight_fetches), a tenant's (max_inflight_fetches_per_tenant) or a holder's (max_inflight_fetches_per_holder).",
		ConstLabels: prometheus.Labels{"cap": name}}, func() float64 { return float64(f.refused[i].Load()) })
}
