package coordinator

import (
	"fmt"
	"net/netip"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/capgate/capgate/internal/refusallog"
)

// Reasons the token endpoint refuses a client authentication, the reason
// label of capgate_coordinator_oauth_token_refusals_total.
const (
	oauthRefusedInvalid   = "invalid_client"  // 401: unknown client, wrong secret, revoked client
	oauthRefusedThrottled = "throttled"       // 429: a failure past its address's budget
	oauthRefusedLiveMax   = "live_tokens_max" // 429: the right secret, but oauth.live_tokens_max credentials alive
)

// oauthMetrics are what the token endpoint tells an operator about
// refusals: counts by reason, the addresses the failure budget tracks, and a
// rate-limited WARN line for each refused authentication (its own
// refusallog, so a guessing flood does not crowd out the admin and sync
// token refusals).
type oauthMetrics struct {
	refusals  *prometheus.CounterVec
	addresses prometheus.GaugeFunc

	logOnce sync.Once
	log     *refusallog.Log
}

// init builds the metrics; the gauge reads r's failure budget.
func (m *oauthMetrics) init(r *oauthRegistry) {
	*m = oauthMetrics{
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capgate_coordinator_oauth_token_refusals_total",
			Help: "Token requests refused at POST /oauth/token by reason: invalid_client (401: unknown client, wrong secret, revoked client), throttled (429: a failure past oauth.max_failures from its address; the right secret is never throttled), live_tokens_max (429).",
		}, []string{"reason"}),
		addresses: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "capgate_coordinator_oauth_failure_addresses",
			Help: "Client addresses (IPv6: /64s) the token endpoint's failure budget tracks (at most oauth.limiter_entries; past it new ones share one budget).",
		}, func() float64 { return float64(r.failures.Len()) }),
	}
	for _, reason := range []string{oauthRefusedInvalid, oauthRefusedThrottled, oauthRefusedLiveMax} {
		m.refusals.WithLabelValues(reason)
	}
}

// Describe and Collect make the registry a prometheus.Collector.
func (r *oauthRegistry) Describe(ch chan<- *prometheus.Desc) {
	r.refusals.Describe(ch)
	r.addresses.Describe(ch)
}

func (r *oauthRegistry) Collect(ch chan<- prometheus.Metric) {
	r.refusals.Collect(ch)
	r.addresses.Collect(ch)
}

// refusedOAuth counts a refused token request and logs it at warn
// (rate-limited): the reason, the client id as sent (loggedClientID) and
// the caller's address — never the secret.
func (c *Coordinator) refusedOAuth(reason, clientID string, address netip.Addr, fields ...zap.Field) {
	r := c.oauth
	r.refusals.WithLabelValues(reason).Inc()
	r.logOnce.Do(func() { r.log = refusallog.New(c.log) })
	fields = append(fields, zap.String("client_id", loggedClientID(clientID)), zap.String("address", address.String()))
	r.log.Refused("oauth client", reason, fields...)
}

// loggedClientID is how a refusal's log names the client id sent: as
// sent when it has the shape of the ids the coordinator issues
// (newClientSecretPair: "cg-" and 16 base64url characters), else only by
// its length. A client that swapped its id and secret (form fields, or
// Basic's user and password) sent its secret as the id, and the log held
// it whole (redteam17).
func loggedClientID(id string) string {
	if len(id) == len(clientIDPrefix)+16 && strings.HasPrefix(id, clientIDPrefix) &&
		strings.Trim(id[len(clientIDPrefix):], base64URLAlphabet) == "" {
		return id
	}
	return fmt.Sprintf("(%d bytes, not shaped as a client id: not logged)", len(id))
}

// clientIDPrefix starts every client id (newClientSecretPair).
const clientIDPrefix = "cg-"

const base64URLAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
